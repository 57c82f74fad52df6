"""Load the chapter-13 implementation a run is about, and keep the reference out of reach.

``load_impl("learner" | "solutions" | PATH)`` executes that one file as the module
``ch13_leases``. ``block_reference()`` makes the rest of ``solutions/`` unreadable for the
life of the process: importing it, or opening any file under it (``runpy``, ``open``,
``exec(open(...).read())``) fails with a message that says the reference is blocked. A
checkpoint that ran the student's code with the reference in reach would prove nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

from lucyshop import IMPL_ENV, chosen_impl

ROOT = Path(__file__).resolve().parents[3]
SOLUTIONS = ROOT / "solutions"
MODULE = "ch13_leases"
CHAPTER = f"{MODULE}.py"
EXERCISES = "exercises.py"  # the answers, beside their chapter file
PG_FILE = "ch13_postgres.py"  # exercise 7, beside it too
STUDENT_FILES = (CHAPTER, EXERCISES, PG_FILE)  # what a student writes, by these names
IMPLEMENTATIONS = {"learner": ROOT / "learner" / CHAPTER, "solutions": SOLUTIONS / CHAPTER}
BLOCKED_ENV = (
    "LUCYSHOP_BLOCKED"  # set by block_for; a child that loads an implementation blocks too
)


class ReferenceBlocked(ImportError):
    """Raised when blocked code reaches for the reference solutions."""


class ImplementationError(ValueError):
    """The chosen implementation cannot be loaded (unknown name, missing file, syntax error)."""


def impl_path(spec: str | os.PathLike | None = None) -> Path:
    """The file ``spec`` names (``chosen_impl``: else ``$LEASES_IMPL``, else learner):
    ``learner``, ``solutions``, any ``.py`` file as it is, or a folder's chapter file. Every
    command's ``--impl`` ends here."""
    spec = chosen_impl(spec)
    path = Path(IMPLEMENTATIONS.get(str(spec), spec)).expanduser().resolve()
    if path.is_dir():
        path = path / CHAPTER
    if not path.is_file() or path.suffix != ".py":
        raise ImplementationError(
            f"no implementation at {spec!r}: use 'learner', 'solutions' or the path of a .py file"
        )
    return path


def chapter_of(spec: str | os.PathLike | None = None) -> Path:
    """``impl_path``'s file, where an ``exercises.py`` stands for the chapter file beside it: a
    hand-in named by its answers (the suites' ``--impl``)."""
    path = impl_path(spec)
    if path.name != EXERCISES:
        return path
    if not path.with_name(CHAPTER).is_file():
        raise ImplementationError(f"no {CHAPTER} beside {path}: the answers need their chapter")
    return path.with_name(CHAPTER)


def add_impl_option(parser: argparse.ArgumentParser) -> None:
    """Give a command ``--impl``: the chapter file, chosen when the command starts
    (``lucyshop.chosen_impl``), so that what it runs and what it prints name the same file."""
    parser.add_argument(
        "--impl",
        default=str(chosen_impl()),
        help=f"learner, solutions or a .py path (default ${IMPL_ENV}, else learner)",
    )


def load_impl(spec: str | os.PathLike | None = None) -> ModuleType:
    """Execute the implementation file as module ``ch13_leases`` (fresh each call) and return it."""
    path = impl_path(spec)
    if os.environ.get(BLOCKED_ENV) and not is_blocked():
        block_for(os.environ[BLOCKED_ENV])  # a child of a blocked process stays blocked
    module_spec = importlib.util.spec_from_file_location(MODULE, path)
    module = importlib.util.module_from_spec(module_spec)
    previous = sys.modules.get(MODULE)
    sys.modules[MODULE] = module  # dataclasses and pickling look the module up by name
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as error:
        _restore(previous)
        raise ImplementationError(
            f"{path} does not compile: line {error.lineno}: {error.msg}"
        ) from None
    except BaseException:
        _restore(previous)
        raise
    for hook in _AFTER_LOAD:
        hook(module)
    return module


_AFTER_LOAD: list[Callable[[ModuleType], None]] = []


def after_load(hook: Callable[[ModuleType], None]) -> None:
    """Call ``hook(module)`` after every ``load_impl`` in this process, whoever calls it.

    The grader's pytest plugin uses it to make a function that already hung fail at once in
    every later load (the learner fixtures' and the exercise answers' alike).
    """
    _AFTER_LOAD.append(hook)


def _restore(previous: ModuleType | None) -> None:
    if previous is None:
        sys.modules.pop(MODULE, None)
    else:
        sys.modules[MODULE] = previous


class _ImportBlocker:
    """A meta path finder (by its method: ``importlib.abc`` would cost every process 20 ms)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "solutions" or name.startswith("solutions."):
            raise ReferenceBlocked(
                f"reference blocked: this process may not import {name!r}; "
                "the checkpoint runs your own functions, not the solutions"
            )


# Audit events the blocker vets; every other event returns after one set lookup.
_QUERY = "lucyshop.reference_blocked"
_PROCESS_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.fork",
        "os.forkpty",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.kill",
        "os.killpg",
        "pty.spawn",
    }
)
_NATIVE_EVENTS = frozenset({"ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle"})
_DIRECT_NATIVE_EVENTS = frozenset(
    {"ctypes.call_function", "ctypes.cdata", "ctypes.addressof", "ctypes.string_at"}
)
_CHANGE_EVENTS = frozenset(
    {"os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod", "shutil.rmtree"}
)
_SCREENED = frozenset(
    {"open", "object.__setattr__", _QUERY}
    | _PROCESS_EVENTS
    | _NATIVE_EVENTS
    | _DIRECT_NATIVE_EVENTS
    | _CHANGE_EVENTS
)
# What nobody may replace on this module's functions (the hook keeps its state in its defaults).
_GUARDED_ATTRIBUTES = frozenset({"__code__", "__defaults__", "__kwdefaults__", "__module__"})
# The kit's own files, which no student code may change while its tests run.
PROTECTED = tuple(
    ROOT / name
    for name in ("spec", "tests", "checkpoints", "src", "solutions", "Makefile", "pyproject.toml")
)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class _Block(NamedTuple):
    """The blocker's state, immutable: it lives in the hook's defaults, never in a global."""

    allowed: frozenset[str]  # real paths (and bytecode prefixes) that may be read
    students: frozenset[str]  # code files whose frames are the student's
    reference: frozenset[tuple[int, int]]  # (st_dev, st_ino) of everything under solutions/
    root: str
    protected: tuple[str, ...]


def _inodes(root: Path, allowed: frozenset[str]) -> frozenset[tuple[int, int]]:
    """(st_dev, st_ino) of ``root`` and every file under it, except the allowed ones."""
    found = set()
    for path in [root, *root.rglob("*")]:
        if _is_allowed(allowed, os.path.realpath(path)):
            continue
        try:
            info = os.stat(path)
        except OSError:
            continue
        found.add((info.st_dev, info.st_ino))
    return frozenset(found)


def _is_allowed(allowed: frozenset[str], real: str) -> bool:
    return real in allowed or any(
        real.startswith(prefix + ".") for prefix in allowed if "__pycache__" in prefix
    )


def _student_frame(block: _Block, _getframe=sys._getframe) -> str | None:
    """The student's file when one of its frames is on the stack, else None."""
    frame = _getframe(1)
    while frame is not None:
        if frame.f_code.co_filename in block.students:
            return frame.f_code.co_filename
        frame = frame.f_back
    return None


def _screen_open(
    block: _Block,
    target: object,
    mode: object = None,
    flags: object = None,
    _stat=os.stat,
    _fstat=os.fstat,
    _realpath=os.path.realpath,
    _fsdecode=os.fsdecode,
    _allowed=_is_allowed,
    _frame=_student_frame,
    _error=ReferenceBlocked,
) -> None:
    """Refuse opening the reference by any name, link or descriptor, and kit files for writing.

    Everything it calls is bound here, at definition: rebinding the module's globals from a
    student's file changes nothing.
    """
    if isinstance(target, int):
        info = _fstat(target)
        if (info.st_dev, info.st_ino) in block.reference:
            raise _error(
                f"reference blocked: this process may not read descriptor {target},"
                " a file of the reference solutions"
            )
        return
    try:
        name = _fsdecode(target)
    except TypeError:
        return
    real = _realpath(name)
    if _allowed(block.allowed, real):
        return
    if real == block.root or real.startswith(block.root + os.sep):
        raise _error(f"reference blocked: this process may not read {real}")
    try:
        info = _stat(name)
    except (OSError, ValueError):
        info = None
    if info is not None and (info.st_dev, info.st_ino) in block.reference:
        raise _error(f"reference blocked: {name} is a link to the reference solutions")
    writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
        isinstance(flags, int) and flags & _WRITE_FLAGS
    )
    if writing and real.startswith(block.protected) and _frame(block):
        raise _error(f"reference blocked: your code may not change {real}")


def _screen_event(
    block: _Block,
    event: str,
    args: tuple,
    _getframe=sys._getframe,
    _realpath=os.path.realpath,
    _fsdecode=os.fsdecode,
    _frame=_student_frame,
    _error=ReferenceBlocked,
) -> None:
    """Every vetted event but ``open``: processes, native code, patched code, kit files."""
    if event == "object.__setattr__":
        if args[1] in _GUARDED_ATTRIBUTES and getattr(args[0], "__module__", "") == __name__:
            raise _error(f"reference blocked: the blocker's {args[1]} may not change")
    elif event in _DIRECT_NATIVE_EVENTS:
        if _getframe(2).f_code.co_filename in block.students:  # the frame that made the call
            raise _error(f"reference blocked: your code may not use ctypes ({event})")
    elif event in _CHANGE_EVENTS:
        if args and isinstance(args[0], int):  # by descriptor: no path to vet, so only the kit
            if _frame(block):
                raise _error(
                    f"reference blocked: your code may not change a file by descriptor ({event})"
                )
            return
        target = _realpath(_fsdecode(args[0])) if args and args[0] else ""
        if target.startswith(block.protected) and _frame(block):
            raise _error(f"reference blocked: your code may not change {target}")
    elif where := _frame(block):
        what = "start or signal processes" if event in _PROCESS_EVENTS else "load native code"
        raise _error(f"reference blocked: {Path(where).name} may not {what} ({event})")


def _make_hook(block: _Block):
    """The audit hook. Its state and helpers are its defaults: rebinding a module global changes
    nothing, and replacing a default or its code is itself refused."""

    def hook(
        event: str,
        args: tuple,
        _block: _Block = block,
        _screened: frozenset[str] = _SCREENED,
        _open=_screen_open,
        _other=_screen_event,
    ) -> None:
        if event not in _screened:
            return
        if event == "open":
            _open(_block, *args[:3])
        elif event == _QUERY:
            args[0].append(True)
        else:
            _other(_block, event, args)

    return hook


def block_reference(
    allow: Iterable[os.PathLike | str] = (), students: Iterable[os.PathLike | str] = ()
) -> None:
    """Block ``solutions/`` for the rest of this process, except the files in ``allow``.

    ``allow`` lets a run *of* the reference (``--impl solutions``) load that one file while
    everything else under ``solutions/`` stays closed. ``students`` names the files whose
    code may not start processes, load native code or patch code while it runs. The first
    call's lists stand: calling it again widens and narrows nothing. The state lives in an
    audit hook, which nothing in the process can remove.
    """
    if is_blocked():
        return
    allowed = set()
    for item in allow:
        real = os.path.realpath(item)
        allowed.add(real)
        cache = Path(real).parent / "__pycache__"
        allowed.add(str(cache / Path(real).stem))  # prefix of its compiled bytecode
    frozen = frozenset(allowed)
    block = _Block(
        allowed=frozen,
        students=frozenset(str(Path(student).resolve()) for student in students),
        reference=_inodes(SOLUTIONS, frozen),
        root=str(SOLUTIONS),
        protected=tuple(str(path) for path in PROTECTED),
    )
    sys.meta_path.insert(0, _ImportBlocker())
    sys.addaudithook(_make_hook(block))


def is_blocked() -> bool:
    """True once this process has the blocker (asked of the hook itself, not of a variable)."""
    answers: list[bool] = []
    sys.audit(_QUERY, answers)
    return bool(answers)


def block_for(spec: str | os.PathLike | None = None) -> None:
    """Block the reference, allowing only the implementation that ``spec`` names.

    That is its chapter file, and the ``exercises.py`` and ``ch13_postgres.py`` (exercise 7)
    beside it (a student's answers go with their own chapter file; the reference answers with
    the reference). The chapter file and exercise 7 are the student's code: their frames may
    not start processes or load native code. The choice is exported (``$LUCYSHOP_BLOCKED``),
    so every process started from here that loads an implementation blocks the reference
    before it runs a line of it.
    """
    path = impl_path(spec)
    os.environ[BLOCKED_ENV] = str(path)
    beside = [path.parent / EXERCISES, path.parent / PG_FILE]
    block_reference(allow=[path, *beside], students=[path, beside[1]])
