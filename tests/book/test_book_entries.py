"""The book's thin entries pass the chapter's commands on to the kit: the learner's file beside
the entry unless ``--impl`` or ``$LEASES_IMPL`` says otherwise, a bare ``--evidence`` given a
place of its own, and the experiment run quick only when ``$LUCYSHOP_BOOK_QUICK`` is 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from lucyshop import IMPL_ENV
from lucyshop.lab import book
from lucyshop.lab.loader import ROOT

ENTRY = ROOT / "book" / "textbook" / "checkpoints" / "entry.py"  # where an entry sits
LEARNER = str(ROOT / "learner" / "ch13_leases.py")
EVIDENCE = str(ROOT / "learner" / "runs" / book.EVIDENCE_NAME)


@pytest.fixture(autouse=True)
def no_chosen_impl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IMPL_ENV, raising=False)


def test_an_entry_belongs_to_the_kit_its_book_folder_is_in(tmp_path: Path) -> None:
    entry = tmp_path / "book" / "textbook" / "learner" / "x.py"
    assert book.kit_of(entry) == tmp_path.resolve()
    assert book.learner_of(entry) == tmp_path.resolve() / "learner" / "ch13_leases.py"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ["--impl", LEARNER]),
        (["--evidence"], ["--impl", LEARNER, "--evidence", EVIDENCE]),
        (["--evidence", "--case", "2"], ["--impl", LEARNER, "--evidence", EVIDENCE, "--case", "2"]),
        (["--evidence", "mine.json"], ["--impl", LEARNER, "--evidence", "mine.json"]),
        (["--impl", "solutions"], ["--impl", "solutions"]),
        (["--impl=x.py", "--evidence"], ["--impl=x.py", "--evidence", EVIDENCE]),
    ],
)
def test_checkpoint_arguments(argv: list[str], expected: list[str]) -> None:
    assert book.checkpoint_arguments(ENTRY, argv) == expected


def test_the_kits_variable_still_chooses_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(IMPL_ENV, "solutions")
    assert book.checkpoint_arguments(ENTRY, []) == ["--impl", "solutions"]


@pytest.mark.parametrize(
    ("environ", "argv", "expected"),
    [
        ({}, ["--out", "r.json"], ["--impl", LEARNER, "--out", "r.json"]),
        (
            {book.QUICK_ENV: "1"},
            ["--out", "r.json"],
            ["--impl", LEARNER, "--out", "r.json", "--quick"],
        ),
        ({book.QUICK_ENV: "0"}, ["--out", "r.json"], ["--impl", LEARNER, "--out", "r.json"]),
        ({book.QUICK_ENV: "1"}, ["--quick"], ["--impl", LEARNER, "--quick"]),
    ],
)
def test_experiment_arguments(environ: dict, argv: list[str], expected: list[str]) -> None:
    assert book.experiment_arguments(ENTRY, argv, environ) == expected


def test_the_learner_entry_defines_the_learner_files_names() -> None:
    entry = (
        ROOT / "book" / "textbook" / "learner" / "profrod_sovereign_agent_ch13_leases_learner.py"
    )
    names = book.learner_names(entry)
    assert {"percentile", "shortest_lease", "claim", "recover_once", "Claim"} <= set(names)
    assert names["claim"].__module__ == "ch13_leases"
    assert names["claim"].__code__.co_filename == LEARNER
