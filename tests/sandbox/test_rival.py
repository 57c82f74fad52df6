"""The rival between a holder check and its write (``lucyshop.lab.checkpoint.rival``), run
here on writers loaded in a real sandbox: the reference holds up; a writer that writes after
a takeover fails, even if it undoes the write before it returns; a writer that acts on which
run it is in fails; and the verdict is read again from the kept copies alone.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from hostile_checks import hostile, reference, split_writers

from lucyshop.lab.checkpoint.rival import (
    BOUND,
    RUNS,
    WRITERS,
    RivalAtEveryMoment,
    RivalWrong,
    problems_in,
)
from lucyshop.lab.sandbox import Sandbox, sandboxed_shop

CALLS = {
    "observe": lambda impl, held: lambda connection: impl.observe(connection, held, {"n": 1}),
    "finish": lambda impl, held: lambda connection: impl.finish(connection, held, "DONE", "ok"),
}


@pytest.fixture
def attempt(tmp_path):
    """``attempt(text, writer)``: the rival against ``writer`` of the chapter file ``text``,
    loaded in a sandbox, on a shop holding one claimed work item; the runs it made, or the
    ``RivalWrong`` it raised."""
    boxes = []

    def run(text: str, writer: str) -> list | RivalWrong:
        where = tmp_path / f"{writer}-{len(boxes)}"
        (where / "scratch").mkdir(parents=True)
        (where / "rival").mkdir()
        (where / "hand-in").mkdir()
        chapter = where / "hand-in" / "ch13_leases.py"
        chapter.write_text(text, encoding="utf-8")
        box = Sandbox(chapter, scratch=[where / "scratch"], workdir=where / "work")
        boxes.append(box)
        impl = box.load(seconds=120)
        db, queue = sandboxed_shop(impl, where / "scratch" / "shop.db")
        impl.enqueue(queue, "source-1", "session-1", "a turn")
        held = impl.claim(db, "till", ttl=300)
        probes = box.kit("lucyshop.lab.sandbox.inside.shop_probes")
        rival = RivalAtEveryMoment(probes, db, held, WRITERS[writer], where / "rival")
        try:
            return rival.attempt(CALLS[writer](impl, held), f"{writer}'s write")
        except RivalWrong as wrong:
            return wrong

    yield run
    for box in boxes:
        box.stop()


@pytest.mark.parametrize("writer", WRITERS)
def test_the_reference_holds_up_at_every_moment_in_runs_it_cannot_tell_apart(attempt, writer):
    runs = attempt(reference(), writer)
    assert not isinstance(runs, RivalWrong), runs
    assert sorted(run.first or 0 for run in runs) == list(range(BOUND + 1))
    assert any(run.refused is not None for run in runs), "no run struck before the check"
    assert problems_in([run.path for run in runs], "kept") == [], "the kept copies disagree"


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("split", "the stale holder still wrote"),
        ("undo_write", "counted even if undone"),
        ("tell_runs_apart", "must not act on which run"),
    ],
)
def test_a_writer_that_slips_past_the_holder_check_fails(attempt, writer, how, said):
    """Two transactions (the kit's mutants); a write undone once the writer saw the
    takeover; a writer that writes safely only where it thinks the rival is (``finish``: on
    anything but a ``sqlite3.Connection``, which the stand-in is; ``observe``: in the first
    call for a claim, as one statement)."""
    text = split_writers() if how == "split" else reference() + hostile(how)
    wrong = attempt(text, writer)
    assert isinstance(wrong, RivalWrong), "the rival found nothing wrong"
    if how == "tell_runs_apart" and writer == "finish":
        said = "the stale holder still wrote"  # it splits on every sqlite3.Connection
    assert said in str(wrong), wrong


def test_the_run_without_a_rival_is_anywhere_among_the_runs(attempt):
    """Its place is drawn each time: in twelve attempts it is not always first (a chance of
    (1/17)^11 that it would be), and the runs each keep the statements they were sent."""
    places = []
    for _ in range(12):
        runs = attempt(reference(), "observe")
        assert not isinstance(runs, RivalWrong), runs
        places.append(next(i for i, run in enumerate(runs) if run.first is None))
    assert len(set(places)) > 1, places


def test_a_kept_copy_that_was_doctored_or_lost_is_a_problem(attempt, tmp_path):
    runs = attempt(reference(), "finish")
    assert not isinstance(runs, RivalWrong), runs
    kept = tmp_path / "kept"
    kept.mkdir()
    paths = [Path(shutil.copy(run.path, kept)) for run in runs]
    assert problems_in(paths, "finish") == []
    assert problems_in(paths[1:], "finish") != [], "a lost copy went unnoticed"
    struck = next(p for p, run in zip(paths, runs) if run.first is not None and run.refused)
    with contextlib.closing(sqlite3.connect(struck, isolation_level=None)) as db:
        db.execute(
            f"INSERT INTO trusted_writes(tbl, op, generation)"
            f" VALUES ('outcomes', 'INSERT', (SELECT generation + 1 FROM {RUNS}))"
        )
    assert any("stale holder still wrote" in p for p in problems_in(paths, "finish"))
    with contextlib.closing(sqlite3.connect(paths[0], isolation_level=None)) as db:
        db.execute(f"UPDATE {RUNS} SET statements = ?", (json.dumps(["SELECT 1"] * 99),))
    assert any("must not act on which run" in p for p in problems_in(paths, "finish"))


def test_the_served_shop_bounds_an_answer_in_bytes_and_the_file_in_growth(tmp_path):
    """A gigabyte made on the fly, in values the stand-in allows: refused at ``MAX_ANSWER`` as
    it is fetched, in about the time that takes, the served shop's own bound named; and writes
    past ``MAX_GROWTH`` find the file full."""
    from lucyshop.lab.sandbox.served import MAX_ANSWER, MAX_GROWTH, AnswerTooLarge, ServedShop

    with contextlib.closing(sqlite3.connect(tmp_path / "shop.db")) as db:
        db.execute("CREATE TABLE transcript(message)")
    server = ServedShop(tmp_path / "shop.db", lambda _number, _sql: None)
    rows = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
    started = time.monotonic()
    with pytest.raises(
        AnswerTooLarge, match=f"stopped reading the answer .* {MAX_ANSWER >> 20} MiB"
    ):
        server.execute(f"{rows} SELECT zeroblob(1000000) FROM n", [1000])
    assert time.monotonic() - started < 2
    assert server.execute("SELECT 1")["rows"] == [[1]]
    with pytest.raises(sqlite3.OperationalError, match="full"):
        server.execute(f"INSERT INTO transcript {rows} SELECT zeroblob(1000000) FROM n", [99])
    assert (tmp_path / "shop.db").stat().st_size < MAX_GROWTH + (1 << 20)
    server.close()
