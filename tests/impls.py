"""Which chapter-13 implementation a test run is about: resolved once, at configure,
for every suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lucyshop.lab.loader import IMPLEMENTATIONS, impl_path

CHAPTER = "ch13_leases.py"
EXERCISES = "exercises.py"
IMPL_PATH = pytest.StashKey[Path]()  # the chapter file chosen with --impl (or $LEASES_IMPL)


def chapter_of(spec: str | os.PathLike) -> Path:
    """The chapter file that ``spec`` names: ``learner``, ``solutions``, a ``.py`` file, a
    directory, or the ``exercises.py`` in one (which stands for the ``ch13_leases.py`` beside
    it)."""
    spec = str(spec)
    if spec in IMPLEMENTATIONS:
        return impl_path(spec)
    path = Path(spec).expanduser().resolve()
    if path.is_dir():
        path = path / CHAPTER
    elif path.name == EXERCISES:
        path = path.with_name(CHAPTER)
    return impl_path(path)
