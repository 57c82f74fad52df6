"""``make check`` (``python -m lucyshop.lab.check``): each chapter function's row, the checkpoint
and the exercises, with the guard around the student's code and the pytest plugin it reads.

``run(path) -> Result`` (``engine``) is the one way to check a file: the command line
(``__main__``), the grader's child, a notebook's ``check()`` and the bench all call it.
``subjects`` says what is checked (a ``Subject`` per row, the rows set aside), ``suites`` runs
the pytest children side by side, ``watcher`` the checkpoint beside them, ``table`` turns
outcomes into rows and lines, ``results`` holds the result and its ``ch13-check/2`` JSON
(``schemas/check.json``), ``guard`` bounds every child and keeps the kit's files, and
``collect`` is the plugin inside each child."""

from __future__ import annotations

from typing import Any

__all__ = ["run"]


def __getattr__(name: str) -> Any:
    """``run``, imported when first asked for: the pytest children import this package for
    its plugin, and need none of the engine's sandbox and checkpoint machinery."""
    if name == "run":
        from lucyshop.lab.check.engine import run

        return run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
