"""The learner and exercise suites' way into the sandbox (the ``sandbox`` fixture lives in
tests/conftest.py): how long a test's calls may take, and the session's worker."""

from __future__ import annotations

import pytest

from lucyshop.lab.sandbox import Sandbox

DEFAULT_BUDGET = 120.0  # seconds of sandbox calls for a test without a deadline of its own


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
