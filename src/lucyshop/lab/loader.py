"""Load the chapter-13 implementation a run is about, and keep the reference out of reach.

``load_impl("learner" | "solutions" | PATH)`` executes that one file as the module
``ch13_leases``. ``block_reference()`` makes the rest of ``solutions/`` unreadable for the
life of the process: importing it, or opening any file under it (``runpy``, ``open``,
``exec(open(...).read())``) fails with a message that says the reference is blocked. A
checkpoint that ran the student's code with the reference in reach would prove nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]
SOLUTIONS = ROOT / "solutions"
IMPLEMENTATIONS = {
    "learner": ROOT / "learner" / "ch13_leases.py",
    "solutions": SOLUTIONS / "ch13_leases.py",
}
MODULE = "ch13_leases"
ENV = "LEASES_IMPL"


class ReferenceBlocked(ImportError):
    """Raised when blocked code reaches for the reference solutions."""


class ImplementationError(ValueError):
    """The chosen implementation cannot be loaded (unknown name, missing file, syntax error)."""


def impl_path(spec: str | os.PathLike | None = None) -> Path:
    """Resolve ``learner``, ``solutions`` or a path (default: ``$LEASES_IMPL``, else learner)."""
    spec = spec or os.environ.get(ENV) or "learner"
    path = IMPLEMENTATIONS.get(str(spec), Path(spec))
    path = Path(path).expanduser().resolve()
    if not path.is_file() or path.suffix != ".py":
        raise ImplementationError(
            f"no implementation at {spec!r}: use 'learner', 'solutions' or the path of a .py file"
        )
    return path


def load_impl(spec: str | os.PathLike | None = None) -> ModuleType:
    """Execute the implementation file as module ``ch13_leases`` (fresh each call) and return it."""
    path = impl_path(spec)
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
    return module


def _restore(previous: ModuleType | None) -> None:
    if previous is None:
        sys.modules.pop(MODULE, None)
    else:
        sys.modules[MODULE] = previous


class _ImportBlocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "solutions" or name.startswith("solutions."):
            raise ReferenceBlocked(
                f"reference blocked: this process may not import {name!r}; "
                "the checkpoint runs your own functions, not the solutions"
            )


_blocked_allow: set[str] | None = None


def block_reference(allow: Iterable[os.PathLike | str] = ()) -> None:
    """Block ``solutions/`` for the rest of this process, except the files in ``allow``.

    ``allow`` lets a run *of* the reference (``--impl solutions``) load that one file while
    everything else under ``solutions/`` stays closed. Calling it again only narrows nothing
    and widens nothing: the first call's allow-list stands.
    """
    global _blocked_allow
    if _blocked_allow is not None:
        return
    allowed = set()
    for item in allow:
        real = os.path.realpath(item)
        allowed.add(real)
        cache = Path(real).parent / "__pycache__"
        allowed.add(str(cache / Path(real).stem))  # prefix of its compiled bytecode
    _blocked_allow = allowed
    sys.meta_path.insert(0, _ImportBlocker())
    sys.addaudithook(_audit)


def is_blocked() -> bool:
    return _blocked_allow is not None


def _audit(event: str, args: tuple) -> None:
    if event != "open" or _blocked_allow is None:
        return
    target = args[0]
    if isinstance(target, int):
        return
    real = os.path.realpath(os.fsdecode(target))
    root = str(SOLUTIONS)
    if real != root and not real.startswith(root + os.sep):
        return
    if real in _blocked_allow or any(
        real.startswith(prefix + ".") for prefix in _blocked_allow if "__pycache__" in prefix
    ):
        return
    raise ReferenceBlocked(f"reference blocked: this process may not read {real}")


def block_for(spec: str | os.PathLike | None = None) -> None:
    """Block the reference, allowing only the implementation that ``spec`` names.

    That is its chapter file and the ``exercises.py`` beside it (a student's answers go
    with their own chapter file; the reference answers with the reference).
    """
    path = impl_path(spec)
    block_reference(allow=[path, path.parent / "exercises.py"])
