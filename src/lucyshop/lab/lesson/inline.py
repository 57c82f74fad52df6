"""The notebooks' inline checks and their partial-work guard.

``check("claim")`` sits right after a function's section, like otter's ``grader.check``: it
runs that function's learner tests on the loaded file as ``make check`` does (the file's
functions run only in the checks' sandboxed worker processes), and answers PASSING, FAILING
(every failing test, one line each) or NOT STARTED, with the command that reruns it. It is
``lucyshop.lab.check.run`` with ``only=`` that row: the row ``make check`` prints. 13d's
``check("claim")`` is the same call on exercise 7's row of that function.

``guard()`` keeps a notebook running under partial work: a stub's ``NotStarted``, and any
``NameError`` or missing step that follows it, prints one line saying what to finish first
and the cell ends without an error, so JupyterLab's Run All goes on to the end. It also loads
a learner file again, before a cell, when the file changed on disk since it was loaded.
"""

from __future__ import annotations

import ast
import hashlib
import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from lucyshop import IMPL_ENV
from lucyshop.lab.check.subjects import PG_EXERCISE
from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.loader import IMPLEMENTATIONS

# Seconds one check may take before it is stopped: generous, as the machine may be busy.
CHECK_TIMEOUT = 120.0
# The widest line a notebook prints. JupyterLab breaks a longer output line at the panel's
# edge, in the middle of a word (its output CSS says ``word-break: break-all``), so every
# printer here wraps at word boundaries first.
WIDTH = 96


# A line that starts like this is a command to copy: it is broken with a shell continuation.
COMMANDS = (".venv/bin/", "python ", "make ")


def wrap(text: str, width: int = WIDTH) -> str:
    """``text`` with each line longer than ``width`` broken at word boundaries; a continuation
    line is indented two spaces past its line's own indent. Words are never split (a path
    longer than the width stays whole on a line of its own). A command line is broken with
    `` \\`` at each line's end, so that it still runs when copied into a shell."""
    lines = []
    for line in str(text).split("\n"):
        if len(line) <= width:
            lines.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        command = line.lstrip().startswith(COMMANDS)
        broken = textwrap.wrap(
            line,
            width - 2 if command else width,
            subsequent_indent=indent + ("    " if command else "  "),
            break_long_words=False,
            break_on_hyphens=False,
        ) or [line]
        if command:
            broken = [piece + " \\" for piece in broken[:-1]] + broken[-1:]
        lines += broken
    return "\n".join(lines)


class StepMissing(RuntimeError):
    """An earlier step did not produce what this cell needs; one line says what to finish."""

    def _render_traceback_(self) -> list[str]:
        return wrap(f"{type(self).__name__}: {self}").split("\n")


class CheckText(str):
    """The text of one check, shown as plain lines in a notebook (not as a quoted string)."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


class Checker:
    """``check(label)`` for one chapter file."""

    def __init__(self, chapter: Path, timeout: float = CHECK_TIMEOUT) -> None:
        self.path = Path(chapter).resolve()
        # The kit's own files by name, so the rerun command shows no machine's absolute path.
        names = {path.resolve(): name for name, path in IMPLEMENTATIONS.items()}
        self.spec = names.get(self.path, str(self.path))
        self.timeout = timeout

    def __call__(self, label: str) -> CheckText:
        return one_row(label, self.spec, self.timeout)


def one_row(label: str, spec: str, timeout: float) -> CheckText:
    """The row ``label`` of the file ``spec``, as ``check.run`` finds it (never printed)."""
    from lucyshop.lab import check  # loads pytest machinery: lazily
    from lucyshop.lab.check.guard import Limits

    result = check.run(spec, only=label, limits=Limits(suite=timeout), echo=False)
    return CheckText(wrap("\n".join(result.feedback)))


def checker(leases: ModuleType) -> Checker:
    """The ``check`` function of a notebook whose implementation is ``leases``.

    The exercises and every child process load the same file: ``$LEASES_IMPL`` is set to it.
    """
    os.environ[IMPL_ENV] = str(Path(leases.__file__))
    return Checker(Path(leases.__file__))


# ---------------------------------------------------------------- partial work
#
# JupyterLab's Run All stops at the first cell whose reply is an error, and a custom exception
# handler still makes the reply an error. So ``guard()`` wraps every later cell in a ``try``
# (an AST transformer): a stub's ``NotStarted``, a ``StepMissing``, and a ``NameError`` that
# follows an earlier stop are printed as one line and the cell ends normally; anything else
# is raised as usual. And before each cell, a learner file that changed on disk is loaded
# again, so a demo never runs the version of a function from before the last edit.

_first_stub: list[BaseException] = []
_SHOWN = "_lucyshop_shown_"  # the value of the cell's last expression, displayed after the try
_STOPPED = "_lucyshop_stopped_"  # prints the one line; False: not a stop, raise it


def _one_line(error: BaseException) -> str:
    if isinstance(error, NotStarted | StepMissing) and not _first_stub:
        _first_stub.append(error)
    if isinstance(error, NotStarted):
        return _without_root(str(error))
    if isinstance(error, NameError) and _first_stub:
        first = _first_stub[0]
        if isinstance(first, NotStarted):
            where = f"{first.function}() (notebook {first.section})"
        else:
            where = str(first)
        return _without_root(
            f"waiting for {where}: this cell uses what it makes; finish it, then rerun from"
            " that cell"
        )
    if isinstance(error, StepMissing):
        return _without_root(f"waiting: {error}")
    return _without_root(f"{type(error).__name__}: {error}")


def _without_root(text: str) -> str:
    from lucyshop.lab.loader import ROOT

    return text.replace(str(ROOT) + "/", "")


def stopped(error: BaseException) -> bool:
    """Print one line for a stop (a stub, a missing step, what cascades from them) and say
    True; False for any other error, which the cell then raises as usual."""
    cascade = isinstance(error, NameError) and _first_stub
    if not (isinstance(error, NotStarted | StepMissing) or cascade):
        return False
    print(wrap(_one_line(error)))
    return True


class _Guarded(ast.NodeTransformer):
    """``try: <cell> except BaseException as e: if not stopped(e): raise``, the cell's last
    expression kept as the cell's displayed value."""

    def visit_Module(self, node: ast.Module) -> ast.Module:
        body = list(node.body)
        if not body or _is_guarded(body):
            return node
        if isinstance(body[-1], ast.Expr):
            last = body.pop()
            keep = ast.Assign(targets=[ast.Name(_SHOWN, ast.Store())], value=last.value)
            body.append(ast.copy_location(keep, last))
        else:
            body.append(_parse(f"{_SHOWN} = None"))
        wrapper = _parse(
            f"try:\n    pass\nexcept BaseException as _lucyshop_error_:\n"
            f"    if not {_STOPPED}(_lucyshop_error_):\n        raise\n    {_SHOWN} = None"
        )
        wrapper.body = body
        shown = ast.Expr(ast.Name(_SHOWN, ast.Load()))
        node.body = [wrapper, shown]
        return ast.fix_missing_locations(node)


def _parse(source: str) -> ast.stmt:
    return ast.parse(source).body[0]


def _is_guarded(body: list[ast.stmt]) -> bool:
    return isinstance(body[0], ast.Try) and any(
        isinstance(h.name, str) and h.name == "_lucyshop_error_" for h in body[0].handlers
    )


# The learner files a notebook runs, by the name it holds them under, each with the function
# that loads it from a path; and the digest of the file each module was loaded from.
_watched: dict[str, Callable[[Path], ModuleType]] = {}
_loaded: dict[int, tuple[Path, str]] = {}


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _remember(module: ModuleType) -> None:
    path = Path(module.__file__).resolve()
    _loaded.setdefault(id(module), (path, _digest(path)))


def reload_changed(namespace: dict[str, Any]) -> None:
    """Load again each watched learner file that changed on disk since its module was loaded,
    saying so in one line; a file that no longer loads keeps the module loaded before."""
    for name, load in _watched.items():
        module = namespace.get(name)
        if not isinstance(module, ModuleType) or not getattr(module, "__file__", None):
            continue
        _remember(module)
        path, digest = _loaded[id(module)]
        now = _digest(path)
        if now is None or now == digest:
            continue
        shown = _without_root(str(path))
        try:
            fresh = load(path)
        except Exception as error:  # noqa: BLE001 a syntax error, an import that fails: say so, go on
            _loaded[id(module)] = (path, now)
            print(
                wrap(
                    f"{shown} changed but does not load ({type(error).__name__}: {error});"
                    " the cells go on with the version loaded before"
                )
            )
            continue
        _loaded[id(fresh)] = (path, now)
        namespace[name] = fresh
        print(wrap(f"reloaded {shown}: it changed on disk"))


def _before_cell(info: Any = None) -> None:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        reload_changed(shell.user_ns)


def _after_cell(result: Any = None) -> None:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        return
    for name in _watched:  # a module loaded in this cell: its file as it was loaded
        module = shell.user_ns.get(name)
        if isinstance(module, ModuleType) and getattr(module, "__file__", None):
            _remember(module)


def guard(**files: Callable[[Path], ModuleType]) -> None:
    """Keep Run All going under partial work, and run the learner files as they are on disk.

    Every later cell is wrapped so that a stub, and what cascades from it, prints one line
    and the run goes on. ``files`` names the variables that hold learner modules, each with the
    function that loads it from a path (default: ``leases``, loaded by ``load_impl``); before
    each cell, one whose file changed on disk is loaded again. Outside IPython: nothing.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    from lucyshop.lab.loader import load_impl

    _first_stub.clear()
    _watched.clear()
    _watched.update(files or {"leases": load_impl})
    _after_cell()
    shell.user_ns[_STOPPED] = stopped
    if not any(isinstance(t, _Guarded) for t in shell.ast_transformers):
        shell.ast_transformers.append(_Guarded())
    for event, callback in (("pre_run_cell", _before_cell), ("post_run_cell", _after_cell)):
        if callback not in shell.events.callbacks[event]:
            shell.events.register(event, callback)


def needs(value: Any, what: str, finish: str) -> Any:
    """``value`` when an earlier step produced it; else stop with one line naming the step."""
    if value is None:
        raise StepMissing(f"{what} is missing: {finish}")
    return value


# ---------------------------------------------------------------- exercise 7 (13d)

# Seconds one exercise-7 check may take: its tests start a PostgreSQL server of their own.
PG_CHECK_TIMEOUT = 300.0


class PgChecker(Checker):
    """``check("claim")`` in 13d: the row of that one exercise-7 function (``exercise 7
    claim``, ``subjects.PG_ROWS``) on the ``ch13_postgres.py`` beside the chapter file, as
    ``check.run`` finds it: NOT STARTED while it is a stub (read from its syntax, so its tests
    do not run), else PASSING or FAILING (each failing test, one line, with the command that
    reruns it). ``check("exercise 7")`` shows ``make check``'s row of all four."""

    def __call__(self, name: str) -> CheckText:
        return super().__call__(name if name == PG_EXERCISE else f"{PG_EXERCISE} {name}")


def pg_checker(chapter: Path) -> PgChecker:
    """The ``check`` of notebook 13d, for the ``ch13_postgres.py`` beside ``chapter``."""
    return PgChecker(chapter, timeout=PG_CHECK_TIMEOUT)
