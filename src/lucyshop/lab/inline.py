"""The notebooks' inline checks and their partial-work guard.

``check("claim")`` sits right after a function's section, like otter's ``grader.check``: it
runs that function's learner tests on the loaded file, with the reference blocked, and
answers PASSING, FAILING (every failing test, one line each) or NOT STARTED, with the command
that reruns it. It builds on ``lucyshop.lab.report.verdict``, the row ``make check`` prints.

``guard()`` keeps a notebook readable under partial work: a stub's ``NotStarted``, and any
``NameError`` or missing step that follows it, is shown as one line saying what to finish
first, instead of a traceback cascade.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from lucyshop.lab.loader import ENV, IMPLEMENTATIONS
from lucyshop.lab.stubs import NotStarted

# Seconds one check may take before it is stopped: generous, as the machine may be busy.
CHECK_TIMEOUT = 120.0


class StepMissing(RuntimeError):
    """An earlier step did not produce what this cell needs; one line says what to finish."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class Verdict(str):
    """The text of one check, shown as plain lines in a notebook (not as a quoted string)."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


class Checker:
    """``check(label)`` for one loaded implementation file."""

    def __init__(self, leases: ModuleType, timeout: float = CHECK_TIMEOUT) -> None:
        self.path = Path(leases.__file__).resolve()
        # The kit's own files by name, so the rerun command shows no machine's absolute path.
        names = {path.resolve(): name for name, path in IMPLEMENTATIONS.items()}
        self.spec = names.get(self.path, str(self.path))
        self.timeout = timeout
        self.last_seconds = 0.0

    def __call__(self, label: str) -> Verdict:
        from lucyshop.lab.report import Limits, verdict  # loads pytest machinery: lazily

        started = time.monotonic()
        try:
            text = verdict(label, spec=self.spec, limits=Limits(suite=self.timeout))
        finally:
            self.last_seconds = time.monotonic() - started
        return Verdict(text)


def checker(leases: ModuleType) -> Checker:
    """The ``check`` function of a notebook whose implementation is ``leases``.

    The exercises and every child process load the same file: ``$LEASES_IMPL`` is set to it.
    """
    os.environ[ENV] = str(Path(leases.__file__))
    return Checker(leases)


# ---------------------------------------------------------------- partial work

_first_stub: list[NotStarted] = []


def _one_line(error: BaseException) -> str:
    if isinstance(error, NotStarted):
        if not _first_stub:
            _first_stub.append(error)
        return f"NotStarted: {error}"
    if isinstance(error, NameError) and _first_stub:
        stub = _first_stub[0]
        return (
            f"{type(error).__name__}: {error}: an earlier cell stopped at {stub.function}();"
            f" finish it first (notebook {stub.section}), then rerun from the top"
        )
    return f"{type(error).__name__}: {error}"


def _handler(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None):
    if isinstance(value, NameError) and not _first_stub:
        stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    else:
        stb = [_one_line(value)]
    if _SHOWS_ITSELF:
        shell._showtraceback(etype, value, stb)
        return []
    return stb


def _handler_shows_itself() -> bool:
    """IPython 9 leaves showing a custom handler's traceback to the handler; 8 shows it."""
    try:
        import IPython
    except ImportError:
        return False
    return IPython.version_info[0] >= 9


_SHOWS_ITSELF = _handler_shows_itself()


def guard() -> None:
    """Show a stub, and what cascades from it, as one line (inside IPython; else nothing)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        _first_stub.clear()
        shell.set_custom_exc((NotStarted, NameError), _handler)


def needs(value: Any, what: str, finish: str) -> Any:
    """``value`` when an earlier step produced it; else stop with one line naming the step."""
    if value is None:
        raise StepMissing(f"{what} is missing: {finish}")
    return value
