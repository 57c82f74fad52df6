"""A pytest plugin: the chapter file a run is about, and the sandbox that runs it.

    python -m pytest spec/learner --impl solutions

Every suite that tests a chapter file (spec/learner, spec/exercises, spec/postgres) needs it:
``spec/conftest.py`` loads it for them, ``tests/conftest.py`` for the kit's own tests.
``--impl`` is resolved once, at configure, by ``lucyshop.lab.loader.chapter_of`` (the kit's
one rule for which file is meant) and kept in ``config.stash[IMPL_PATH]``. The ``sandbox``
fixture is the session's sandboxed worker: no test process imports a student's file.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from lucyshop.lab.evidence.receipts import shown
from lucyshop.lab.loader import ImplementationError, block_for, chapter_of
from lucyshop.lab.sandbox import Sandbox
from lucyshop.lab.sandbox.jail import remove_tree

IMPL_PATH = pytest.StashKey[Path]()  # the chapter file chosen with --impl (or $LEASES_IMPL)
DEFAULT_BUDGET = 120.0  # seconds of sandbox calls for a test without a deadline of its own


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chapter 13")
    group.addoption(
        "--impl",
        help="learner, solutions, a .py file or its folder (default: $LEASES_IMPL, else learner)",
    )
    group.addoption(
        "--block-reference",
        action="store_true",
        help="make solutions/ unreadable in this process, except the implementation chosen",
    )


def pytest_configure(config: pytest.Config) -> None:
    try:
        path = chapter_of(config.getoption("--impl"))
    except ImplementationError as error:
        raise pytest.UsageError(str(error)) from None
    config.stash[IMPL_PATH] = path
    if config.getoption("--block-reference"):
        block_for(path)


@pytest.fixture(scope="session")
def sandbox(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Sandbox]:
    """The sandboxed worker that runs the chapter file (and the ``exercises.py`` beside it),
    one for the session. The session's temporary directory is the only place both sides share."""
    impl_file = pytestconfig.stash[IMPL_PATH]
    workdir = Path(tempfile.mkdtemp(prefix="ch13-sandbox-"))
    try:
        scratch = [tmp_path_factory.getbasetemp()]
        with Sandbox(impl_file, scratch=scratch, workdir=workdir, shown=shown(impl_file)) as box:
            yield box
    finally:
        remove_tree(workdir)


def budget(request: pytest.FixtureRequest) -> float:
    """The seconds a test's calls into the sandbox may take in all: its deadline."""
    for name in ("deadline", "timeout"):  # make check's deadline, else pytest-timeout's
        marker = request.node.get_closest_marker(name)
        if marker is not None and marker.args:
            return float(marker.args[0])
    return float(request.config.getini("timeout") or DEFAULT_BUDGET)


def sandbox_for(request: pytest.FixtureRequest) -> Sandbox:
    """The session's sandbox, told which functions already hung (``make check``'s plugin)."""
    box = request.getfixturevalue("sandbox")
    if "tmp_path" in request.fixturenames:  # the test's own directory is the sandbox's too
        box.share(request.getfixturevalue("tmp_path"))
    outcomes = request.config.pluginmanager.get_plugin("lucyshop-outcomes")
    if outcomes is not None:  # a function that hung fails at once from now on
        box.hung = outcomes.hung
    return box
