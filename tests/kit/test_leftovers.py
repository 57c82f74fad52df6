"""The leftover-process guard (``tests/leftovers.py``), in a pytest session of its own, loaded as
``tests/conftest.py`` loads it: a process a test leaves running fails that test, and only that
test; a module's or the session's server started before a test (the session's first asked for
by a later test), and a process ended by the test, are not leftovers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

SESSION = """
import subprocess
import sys

import pytest

from lucyshop.lab.check import suites

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]
LEFT = []


def serve():
    proc = subprocess.Popen(SLEEP)
    yield proc
    proc.kill()
    proc.wait()


server = pytest.fixture(scope="module")(serve)
session_server = pytest.fixture(scope="session")(serve)


def test_first():
    pass


def test_a_module_server_started_before_the_test_is_not_a_leftover(server):
    pass


def test_a_session_server_started_before_the_test_is_not_a_leftover(session_server):
    pass


def test_leaves_a_process_running():
    LEFT.append(subprocess.Popen(SLEEP))


def test_after_the_leftover():
    pass


def test_a_process_ended_by_the_test_is_not_a_leftover():
    proc = subprocess.Popen(SLEEP)
    proc.kill()
    proc.wait()


def test_ends_the_leftover():
    for proc in LEFT:
        proc.kill()
        proc.wait()
"""


CONFTEST = 'pytest_plugins = ("leftovers",)\n'


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, str]:
    """Each test of SESSION and how it ended: PASSED, or ERROR (its guard failed it at teardown,
    after its call passed)."""
    directory = tmp_path_factory.mktemp("leftovers")
    (directory / "tests").mkdir()
    (directory / "tests" / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (directory / "tests" / "test_session.py").write_text(SESSION, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-q", "--color=no"]
        + ["-o", f"pythonpath={TESTS}", "--rootdir", str(directory), "tests"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": "/usr/bin:/bin"},
    )
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "ERROR", "FAILED") and "::" in rest:
            name = rest.split("::")[1].split(" ")[0]
            found[name] = word if found.get(name, "PASSED") == "PASSED" else found[name]
    assert found, done.stdout + done.stderr
    return found | {"_output": done.stdout}


def test_a_process_left_running_fails_the_test_that_started_it(outcomes):
    assert outcomes["test_leaves_a_process_running"] == "ERROR", outcomes["_output"]
    assert "the test left processes running" in outcomes["_output"]


def test_every_other_test_passes(outcomes):
    others = {name: how for name, how in outcomes.items() if not name.startswith("_")}
    del others["test_leaves_a_process_running"]
    assert set(others.values()) == {"PASSED"}, outcomes["_output"]
    assert len(others) == 6
