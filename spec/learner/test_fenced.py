"""``fenced(writer_generation, current_generation)``: must a writer be refused because the lease
moved on?"""

from __future__ import annotations

import pytest
from learner_support import refuses


@pytest.mark.parametrize(("writer", "current"), [(1, 2), (1, 9), (4, 5)])
def test_an_older_generation_is_fenced(impl, writer, current):
    assert impl.fenced(writer, current) is True, (
        f"a writer at {writer} when the lease is at {current}"
    )


@pytest.mark.parametrize("generation", [1, 2, 17])
def test_the_current_generation_is_not_fenced(impl, generation):
    assert impl.fenced(generation, generation) is False, (
        f"a writer at the current generation {generation}"
    )


@pytest.mark.parametrize(
    ("writer", "current"),
    [(3, 2), (0, 1), (1, 0), (0, 0), (-1, 2), (1.0, 2), (1, 2.0), ("1", 2), (1, None), (True, 2)],
    ids=[
        "ahead",
        "writer-0",
        "current-0",
        "both-0",
        "negative",
        "float-writer",
        "float-current",
        "str",
        "none",
        "bool",
    ],
)
def test_corrupt_or_malformed_generations_are_refused(impl, writer, current):
    with refuses(ValueError, f"fenced({writer!r}, {current!r})"):
        impl.fenced(writer, current)
