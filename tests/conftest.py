"""make test's own session: the chapter plugin every suite needs, a guard that no test leaves a
process behind (``leftovers``), the suite markers, the longest files first (``schedule``), and
the shop fixtures every suite shares (``spec/shop_fixtures.py``, a plugin: ``supplier``,
``shared_supplier``, ``garbage_supplier``, ``pg_server``; ``held`` for spec/'s suites).

``make check`` never loads this file: its pytest children run only spec/, whose own
``conftest.py`` loads the chapter plugin (``lucyshop.lab.check.suites``), so what is here
serves the kit's own tests, and make test's session around spec/ (markers, order, leftovers).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from schedule import TESTS, rank

# Plugins, not names imported here: a conftest's hooks are not called for the session's own
# fixtures (their node is the root, above tests/), and the guard must see those set up too.
pytest_plugins = ("lucyshop.lab.check.plugin.chapter", "leftovers", "shop_fixtures")

SUITES = ("runtime", "learner", "exercises")
# runtime: tests/runtime; learner: spec/learner; exercises: spec/exercises and spec/postgres
# (exercise 7); proof: proof/; every other room of tests/ and the modules beside them: kit
SPEC = TESTS.parent / "spec"
PROOF = TESTS.parent / "proof"


@pytest.hookimpl(optionalhook=True)  # make test-fast runs without xdist
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``make test``'s ``-n auto``: a worker per core and two more. About a third of a worker's
    time is spent waiting (real leases running out, deadlines, servers starting, the model
    lock); the extra workers run files in that time. On two cores, with one extra worker the
    machine sat idle for a tenth of a make test (70 of 700 core-seconds); with two, 3%."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):  # xdist's own override still wins
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    try:
        cores = len(os.sched_getaffinity(0))  # the cores this process may use (Linux)
    except AttributeError:  # macOS
        cores = os.cpu_count() or 1
    return cores + 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its suite (pyproject.toml lists the markers), so ``-m`` can pick;
    the longest files first."""
    for item in items:
        if item.path.is_relative_to(SPEC):
            suite = item.path.relative_to(SPEC).parts[0]
            item.add_marker("learner" if suite == "learner" else "exercises")
        elif item.path.is_relative_to(PROOF):
            item.add_marker("proof")
        elif item.path.is_relative_to(TESTS):
            suite = item.path.relative_to(TESTS).parts[0]
            item.add_marker(suite if suite in SUITES else "kit")

    items.sort(key=lambda item: rank(item.path))  # stable: each file's own order is kept


@pytest.fixture
def own_tmpdir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary directory of the test's own, as ``TMPDIR`` for its children and ``tempfile``'s
    directory here, removed after it: what a notebook kernel or a server makes there is neither
    left behind nor seen by another test. Short, under the system's temporary directory (a
    PostgreSQL socket lives there), and open to all like it (as root, that server runs as
    another user)."""
    with tempfile.TemporaryDirectory(prefix="ch13t-") as name:
        os.chmod(name, 0o1777)
        monkeypatch.setattr(tempfile, "tempdir", name)
        monkeypatch.setenv("TMPDIR", name)
        yield Path(name)
