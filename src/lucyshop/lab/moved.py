"""Old import paths that hand-ins use, kept working for one term after the lab moved into rooms.

A file written against the old flat lab (``from lucyshop.lab.pg_shop import PgClaim``) still
imports: the old name is served the moved module itself (the same object, so ``isinstance`` and
module state agree), with a ``DeprecationWarning`` naming the new path. Remove after ``UNTIL``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from importlib.machinery import ModuleSpec
from types import ModuleType

UNTIL = "the end of the 2026-27 term"
MOVED = {  # old path: new path; only what a chapter file or exercises file imported
    "lucyshop.lab.stubs": "lucyshop.lab.given.stubs",
    "lucyshop.lab.pg_shop": "lucyshop.lab.given.pg_shop",
    "lucyshop.lab.exercise_kit": "lucyshop.lab.given.exercise_kit",
    "lucyshop.lab.renewals": "lucyshop.lab.given.renewals",
    "lucyshop.lab.exercise_book": "lucyshop.lab.exercises.book",
    "lucyshop.lab.exercise_runs": "lucyshop.lab.exercises.runs",
    "lucyshop.lab.processes": "lucyshop.lab.services.processes",
    "lucyshop.lab.suppliers": "lucyshop.lab.services.suppliers",
}


class OldPaths:
    """Finds an old path and loads it as the module now at its new one: a meta path finder and
    its loader by their methods (``importlib.abc``'s base classes would cost every process that
    imports the lab 20 ms, ``importlib.resources`` with them)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} has moved to {new}; the old path works until {UNTIL}",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run, the module being loaded already; give it back its own spec, which
        the import system overwrote with the old path's."""
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    if not any(isinstance(finder, OldPaths) for finder in sys.meta_path):
        sys.meta_path.append(OldPaths())
