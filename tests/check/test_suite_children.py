"""What ``make check``'s pytest children load from tests/: the graded suites' own conftests,
nothing else. The machinery is the lab's (``lucyshop.lab.check.plugin``); ``tests/conftest.py``
is make test's own session (its leftover-process guard, the order of its files) and stays out."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from lucyshop.lab.check import suites
from lucyshop.lab.check.subjects import SUITES
from lucyshop.lab.loader import IMPLEMENTATIONS, ROOT

TESTS = ROOT / "tests"
REGISTERED = re.compile(r"PLUGIN registered: <module '([^']+)' from '([^']+)'>")


def test_a_checks_children_load_the_suites_conftests_and_no_other_module_of_tests(tmp_path):
    argv = suites.suite_argv(
        IMPLEMENTATIONS["solutions"], SUITES, tmp_path / "outcomes.jsonl", {}, [], 30
    )
    done = subprocess.run(
        [*argv, "--collect-only", "--trace-config"],
        cwd=ROOT,
        env=os.environ | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    registered = REGISTERED.findall(done.stdout)  # (module, file): conftests share a name
    assert "lucyshop.lab.check.plugin.chapter" in dict(registered), done.stdout[-2000:]
    from_tests = {
        Path(file).relative_to(TESTS).as_posix()
        for _, file in registered
        if Path(file).is_relative_to(TESTS)
    }
    assert from_tests == {f"{Path(suite).name}/conftest.py" for suite in SUITES}, from_tests
