"""What ``make check``'s children run and load: each row module in one pytest child, each
checkpoint case in one checkpoint child, and from spec/ its conftests, nothing of tests/. The
machinery is the lab's (``lucyshop.lab.check.plugin``); ``tests/conftest.py`` is make test's own
session (its leftover-process guard, the order of its files) and stays out."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from lucyshop.lab.check import suites, watcher
from lucyshop.lab.check.guard import new_marker
from lucyshop.lab.check.subjects import (
    FUNCTIONS,
    MEASUREMENTS,
    SPEC,
    SUITES,
    module_of,
    set_aside,
    subject,
)
from lucyshop.lab.checkpoint.cases import CASES
from lucyshop.lab.loader import IMPLEMENTATIONS, ROOT

REGISTERED = re.compile(r"PLUGIN registered: <module '([^']+)' from '([^']+)'>")


def test_a_checks_children_load_the_specs_conftests_and_nothing_of_the_kits_tests(tmp_path):
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
    files = {Path(file) for _, file in registered}
    assert not [file for file in files if file.is_relative_to(ROOT / "tests")], files
    spec = {file.relative_to(ROOT).as_posix() for file in files if file.is_relative_to(ROOT / SPEC)}
    shared = {f"{SPEC}/conftest.py", f"{SPEC}/shop_fixtures.py"}  # the plugin it loads
    assert spec == shared | {f"{suite}/conftest.py" for suite in SUITES}, spec


def test_the_chapters_suite_is_dealt_to_its_children_each_module_once_by_name():
    """Its modules, by path (a file of spec/ that no row names never runs), each in one child."""
    _paths, parts = suites.plan({}, {})
    chapter = {f"{SUITES[0]}/{module_of(function)}.py" for function in FUNCTIONS}
    dealt = [part for part in parts if chapter & set(part)]
    assert len(dealt) == suites.CHILDREN_OF[SUITES[0]] > 1, dealt
    assert sorted(module for part in dealt for module in part) == sorted(chapter), dealt
    assert all((ROOT / module).is_file() for part in parts for module in part), parts


def test_each_measurement_runs_alone_and_the_rest_of_its_row_beside_exercises_1_to_4():
    """Exercise 5's measurement starts at once in a child of its own; its functions' own tests
    run in the exercises suite's child; both modules make the one row; --no-measured (the
    row set aside) runs neither."""
    _paths, parts = suites.plan({}, {})
    exercises = f"{SUITES[1]}/test_exercise_"
    for module in MEASUREMENTS:
        assert [f"{SUITES[1]}/{module}.py"] in parts, parts
    shared = next(part for part in parts if f"{exercises}1.py" in part)
    assert f"{exercises}5_renew.py" in shared and f"{exercises}5.py" not in shared, shared
    assert subject("exercise 5").modules == ("test_exercise_5_renew", "test_exercise_5")
    aside = set_aside(IMPLEMENTATIONS["solutions"], False, {})
    _paths, parts = suites.plan({}, aside)
    assert not [m for part in parts for m in part if m.startswith(f"{exercises}5")], parts


def test_the_checkpoints_cases_are_dealt_to_its_children_each_once():
    dealt = watcher.dealt_cases()
    assert len(dealt) == min(watcher.CHILDREN, len(CASES)) > 1, dealt
    assert sorted(case for cases in dealt for case in cases) == sorted(CASES), dealt


def test_a_child_counts_its_modules_tests_before_a_rerun_deselects_any(tmp_path):
    """A rerun leaves out (``--deselect``) the tests that already gave a result; the count its
    row is held to is still every test of the module, as the pristine collection finds."""
    module = f"{SUITES[0]}/{module_of('Claim.worker_id')}.py"
    outcomes = suites.OutcomeReader(tmp_path / "outcomes.jsonl")
    done = {f"{module}::test_": {}}  # every test of it, as if a first run had reached them all
    argv = suites.suite_argv(IMPLEMENTATIONS["solutions"], [module], outcomes.path, done, [], 30)
    env = os.environ | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=300, check=False)
    run = suites.SuiteRun()
    outcomes.read()
    suites.keep_outcomes(run, outcomes, [])
    pristine = suites.pristine_counts(tmp_path, new_marker(), [module])
    stem = Path(module).stem
    assert run.results == {}, "every test was deselected"
    assert run.counts == suites.read_counts(pristine) == {stem: run.counts[stem]}, run.counts
    assert run.counts[stem] > 0


def test_a_checks_children_cache_bytecode_even_where_the_environment_forbids_it(monkeypatch):
    """A container's PYTHONDONTWRITEBYTECODE would have each of a check's seventy Python
    processes compile the kit's modules again (about 4 CPU-s a check): its children drop it."""
    from lucyshop import IMPL_ENV
    from lucyshop.lab.check.engine import children_env

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = children_env(ROOT / "solutions" / "ch13_leases.py")
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env[IMPL_ENV] == str(ROOT / "solutions" / "ch13_leases.py") and env["PATH"]
