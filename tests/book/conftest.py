"""The chapter's own text, for the tests that run its code: it lies beside the kit, in
``shared/``, on CI and on the authors' machines; a clone without it skips those tests, saying
so."""

from __future__ import annotations

import pytest

from lucyshop.lab import book


@pytest.fixture(scope="session")
def chapter() -> str:
    if not book.CHAPTER_TEXT.is_file():
        pytest.skip(f"the chapter's text is not beside the kit ({book.CHAPTER_TEXT})")
    return book.CHAPTER_TEXT.read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def blocks(chapter: str) -> list[book.Block]:
    return book.blocks(chapter)
