"""Each soak invariant, decided on a shop built row by row: it holds on a clean history and
fails, naming the work, on a history that breaks it.

The shop has the reference's schema and the soak's witnesses (``install_history``), so the
triggers record generations exactly as in a real run; only the processes are left out.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from lucyshop.approval import open_shop
from lucyshop.atomic import write_ready
from lucyshop.lab.loader import impl_path, load_impl
from lucyshop.proof.soak import chaos, invariants
from lucyshop.proof.soak.chaos import (
    CHAOS_EVERY,
    PAUSE_EXTRA,
    PAUSE_SHARE,
    Config,
    Soak,
    chaos_plan,
)
from lucyshop.proof.soak.invariants import Evidence, read_evidence
from lucyshop.proof.soak.script import SCRIPT_SECONDS, Script
from lucyshop.proof.soak.shop import install_history, patient
from lucyshop.store import BUSY_TIMEOUT_MS, WriteLockTimeout, connect
from lucyshop.supplier import Ledger

ACCEPTED_CENTS = 500


class History:
    """A shop, a supplier ledger and worker logs, written by hand through the real schema."""

    def __init__(self, directory: Path) -> None:
        self.shop, self.ledger, self.logs = (
            directory / "shop.db",
            directory / "ledger.sqlite",
            directory / "logs",
        )
        self.logs.mkdir()
        db, _ = open_shop(self.shop)
        db.migrate("leases", load_impl(impl_path("solutions")).LEASE_MIGRATIONS)
        install_history(db, items=10)
        db.isolation_level = None
        self.db = db
        Ledger(self.ledger).close()
        self.items = 0

    def close(self) -> None:
        self.db.close()

    def admit(self) -> int:
        self.items += 1
        return self.db.execute(
            "INSERT INTO work(source_id, session_id, text, state, created) "
            "VALUES (?, 's', 'order ice cream', 'pending', 0)",
            (f"src-{self.items}",),
        ).lastrowid

    def claim(self, work_id: int, generation: int) -> None:
        self.db.execute("UPDATE work SET state = 'running' WHERE work_id = ?", (work_id,))
        self.db.execute(
            "INSERT INTO assignment_leases(work_id, worker_id, expires, generation)"
            " VALUES (?1, ?2, 1e12, ?3) ON CONFLICT(work_id) DO UPDATE"
            " SET worker_id = ?2, generation = ?3",
            (work_id, f"w#{generation}", generation),
        )

    def say(self, work_id: int, generation: int) -> None:
        self.db.execute(
            "INSERT INTO transcript(work_id, generation, message) VALUES (?, ?, '{}')",
            (work_id, generation),
        )

    def finish(self, work_id: int, generation: int, status: str = "DONE") -> None:
        """In the chapter's order, in one transaction: the state moves, then the outcome."""
        with self.db.immediate() as connection:
            connection.execute("UPDATE work SET state = 'finished' WHERE work_id = ?", (work_id,))
            connection.execute(
                "INSERT INTO outcomes(work_id, generation, status, result)"
                " VALUES (?, ?, ?, 'done')",
                (work_id, generation, status),
            )

    def order(self, work_id: int, status: str, cents: int, *, ledger_cents: int | None = None):
        operation = f"op-{work_id}"
        self.db.execute(
            "INSERT INTO assistant_orders(work_id, operation, supplier, proposal, digest,"
            " amount_cents, status, created, updated)"
            " VALUES (?, ?, 'dairy', '{}', 'd', ?, ?, 0, 0)",
            (work_id, operation, cents, status),
        )
        if status in ("ACCEPTED", "REJECTED"):
            self.supplier_holds(operation, status, cents if ledger_cents is None else ledger_cents)

    def supplier_holds(self, operation: str, status: str, cents: int) -> None:
        with closing(sqlite3.connect(self.ledger, isolation_level=None)) as ledger:
            number = ledger.execute("SELECT count(*) + 1 FROM orders").fetchone()[0]
            ledger.execute(
                "INSERT INTO orders(operation, body, status, order_number, amount_cents,"
                " receipt, created) VALUES (?, '{}', ?, ?, ?, '{}', 0)",
                (operation, status, number, cents),
            )

    def spend(self, spent: int, reserved: int = 0) -> None:
        self.db.execute(
            "UPDATE spending_account SET spent_cents = ?, reserved_cents = ?", (spent, reserved)
        )

    def log(self, worker: str, **event) -> None:
        with open(self.logs / f"{worker}.jsonl", "a") as handle:
            handle.write(json.dumps(event) + "\n")

    def evidence(self, *, crashes: tuple[str, ...] = ()) -> Evidence:
        return read_evidence(self.shop, self.ledger, self.logs, items=self.items, crashes=crashes)


def clean_run(h: History) -> dict[str, float]:
    """Work 1 done at generation 1 with an accepted order; work 2 taken over: generation 1 is
    refused after the takeover, generation 2 finishes with a rejected order. Returns times."""
    one, two = h.admit(), h.admit()
    h.claim(one, 1)
    h.say(one, 1)
    h.order(one, "ACCEPTED", ACCEPTED_CENTS)
    h.log("w0.0", e="send", work_id=one, gen=1, t_exec=time.time(), t=time.time(), op="op-1")
    h.finish(one, 1)
    h.log("w0.0", e="write", b="completion", work_id=one, gen=1, ok=True, probe=False)
    h.claim(two, 1)
    h.say(two, 1)
    before_takeover = time.time() - 1
    h.claim(two, 2)
    h.log("w1.0", e="write", b="transcript", work_id=two, gen=1, ok=False, probe=True)
    h.say(two, 2)
    h.order(two, "REJECTED", 300)
    h.finish(two, 2)
    h.spend(ACCEPTED_CENTS)
    return {"before_takeover": before_takeover, "after_takeover": time.time() + 1}


@pytest.fixture
def history(tmp_path):
    h = History(tmp_path)
    yield h
    h.close()


@pytest.mark.parametrize("invariant", invariants.INVARIANTS, ids=lambda f: f.__name__)
def test_every_invariant_holds_on_a_clean_history(history, invariant):
    clean_run(history)
    finding = invariant(history.evidence())
    assert finding.ok, finding.detail
    assert finding.work_ids == ()


def breaks(invariant: Callable[[Evidence], invariants.Finding], evidence: Evidence, ids=()):
    finding = invariant(evidence)
    assert not finding.ok, finding.detail
    assert finding.work_ids == tuple(ids)
    return finding.detail


def test_finished_once_fails_for_work_left_running(history):
    clean_run(history)
    three = history.admit()
    history.claim(three, 1)

    assert "1 not finished exactly once" in breaks(
        invariants.finished_once, history.evidence(), [three]
    )


def test_ledger_matches_fails_when_the_supplier_charged_another_amount(history):
    clean_run(history)
    three = history.admit()
    history.claim(three, 1)
    history.order(three, "ACCEPTED", 200, ledger_cents=250)
    history.finish(three, 1)

    detail = breaks(invariants.ledger_matches, history.evidence(), [three])
    assert "1 orders whose shop status or amount disagrees with the ledger" in detail


def test_ledger_matches_fails_for_an_order_the_shop_does_not_know(history):
    clean_run(history)
    history.supplier_holds("op-ghost", "ACCEPTED", 100)

    assert "1 ledger orders the shop does not know: ['op-ghost']" in breaks(
        invariants.ledger_matches, history.evidence()
    )


def test_money_balances_fails_when_spent_is_not_what_was_accepted(history):
    clean_run(history)
    history.spend(0, reserved=ACCEPTED_CENTS)

    detail = breaks(invariants.money_balances, history.evidence())
    assert f"spent 0, accepted in the shop {ACCEPTED_CENTS}" in detail
    assert f"reserved {ACCEPTED_CENTS} but uncertain 0" in detail


def test_no_superseded_writes_fails_for_a_row_written_after_a_takeover(history):
    clean_run(history)
    three = history.admit()
    history.claim(three, 1)
    history.claim(three, 2)
    history.say(three, 1)  # generation 1 writes although generation 2 holds the lease
    history.finish(three, 2)

    detail = breaks(invariants.no_superseded_writes, history.evidence(), [three])
    assert "written by generation 1 while the lease was at generation 2" in detail


def test_no_superseded_writes_fails_for_a_transcript_row_of_finished_work(history):
    clean_run(history)
    three = history.admit()
    history.claim(three, 1)
    history.finish(three, 1)
    history.say(three, 1)  # the holder's generation, but the work is over

    detail = breaks(invariants.no_superseded_writes, history.evidence(), [three])
    assert "the transcript of work 3 written by generation 1" in detail
    assert "the work finished" in detail


def test_stale_writes_refused_fails_for_an_accepted_probe(history):
    clean_run(history)
    history.log("w1.0", e="write", b="completion", work_id=2, gen=1, ok=True, probe=True)

    detail = breaks(invariants.stale_writes_refused, history.evidence(), [2])
    assert "1 writes accepted from a claim already superseded" in detail


def test_stale_writes_refused_fails_for_a_send_after_the_takeover(history):
    times = clean_run(history)
    sent = {"e": "send", "work_id": 2, "gen": 1, "op": "op-2"}
    history.log("w1.0", **sent, t_exec=times["before_takeover"], t=times["before_takeover"])
    assert invariants.stale_writes_refused(history.evidence()).ok  # began before: admitted

    history.log("w1.0", **sent, t_exec=times["after_takeover"], t=times["after_takeover"])
    detail = breaks(invariants.stale_writes_refused, history.evidence(), [2])
    assert "1 supplier sends by a superseded generation" in detail


def test_stale_writes_refused_fails_for_an_error_or_a_crash(history):
    clean_run(history)
    assert "1 worker crashes" in breaks(
        invariants.stale_writes_refused, history.evidence(crashes=("w0.1 exited with status 1",))
    )
    history.log("w0.1", e="error", type="IntegrityError", message="x", work_id=1, gen=1)
    assert "1 writes failed with something other than PermissionError" in breaks(
        invariants.stale_writes_refused, history.evidence(), [1]
    )


def test_generations_step_by_one_fails_for_a_skipped_generation(history):
    clean_run(history)
    three = history.admit()
    history.claim(three, 1)
    history.claim(three, 3)
    history.finish(three, 3)

    assert "1 assignments whose generations were not 1, 2, 3" in breaks(
        invariants.generations_step_by_one, history.evidence(), [three]
    )


def test_stale_writes_refused_fails_for_an_accepted_scripted_write(history):
    """A write made after the script saw a newer generation take the work over is stale for
    certain, probe or not."""
    clean_run(history)
    history.log("w1.0", e="write", b="completion", work_id=2, gen=1, ok=False, scripted=True)
    assert invariants.stale_writes_refused(history.evidence()).ok  # refused: as it must be

    history.log("w1.0", e="write", b="completion", work_id=2, gen=1, ok=True, scripted=True)
    detail = breaks(invariants.stale_writes_refused, history.evidence(), [2])
    assert "1 writes accepted from a claim already superseded" in detail


def test_a_soak_write_outwaits_every_pause_its_chaos_can_make(tmp_path):
    """A worker paused inside a write transaction holds SQLite's write lock for its whole pause
    (the lease and up to PAUSE_EXTRA more), and a waiter paused while it waits spends its own
    pause on its clock: the soak's busy timeout outlasts one longest pause of every worker, on
    top of the kit's own timeout, and the connections it opens are given it."""
    config = Config(20, 13, tmp_path, "solutions", 4, 60, 1.5, CHAOS_EVERY, PAUSE_SHARE)
    longest = config.lease + PAUSE_EXTRA[1]
    assert config.busy_timeout_ms >= BUSY_TIMEOUT_MS + 1000 * config.workers * longest
    assert all(extra <= PAUSE_EXTRA[1] for _, _, _, extra in chaos_plan(config))

    db = connect(tmp_path / "shop.db")
    other = connect(tmp_path / "shop.db")
    patient(db, 250)
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 250
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(WriteLockTimeout, match="busy timeout of 250 ms"), db.immediate():
            pass
    finally:
        other.execute("ROLLBACK")
        db.close()
        other.close()


def test_the_script_steps_on_events_and_arms_one_boundary_at_a_time(tmp_path, monkeypatch):
    """Armed, stopped (the worker's word), released once the shop shows a newer generation,
    done once the worker has written; the next boundary is armed only then. A worker that
    dies on the way, or a token taken and never answered, is armed again, with files of its
    own, so that a late taker of the old token is never let go."""
    history = History(tmp_path)
    work = history.admit()
    history.claim(work, 1)
    script = Script(tmp_path / "breaks", history.shop, ["completion", "transcript"])
    script.follow(alive=set())
    assert [s.step for s in script.stales] == ["armed", "waiting"]
    assert sorted(p.name for p in script.dir.iterdir()) == ["completion.armed"]

    def take(boundary: str, pid: int, *, answer: bool = True) -> str:  # what a worker does
        token = script.dir / f"{boundary}.armed"
        arming = token.read_text().strip()
        token.unlink()
        if answer:
            where = {"work_id": work, "gen": 1, "pid": pid}
            write_ready(script.dir / f"{boundary}.{arming}.at", where)
        return arming

    first = take("completion", 101)
    script.follow(alive={101})
    assert script.stales[0].step == "stopped" and script.holding() == {101}
    script.follow(alive={101})
    assert script.stales[0].step == "stopped", "no newer generation yet: no go"

    script.follow(alive=set())  # it died before its write: armed again
    assert (script.stales[0].step, script.stales[0].rearmed) == ("armed", 1)
    take("completion", 102, answer=False)  # taken, then its taker killed before it answered
    script.follow(alive={102})
    assert script.stales[0].step == "armed"
    monkeypatch.setattr("lucyshop.proof.soak.script.LOST_SECONDS", 0.0)
    script.follow(alive={102})
    assert (script.stales[0].step, script.stales[0].rearmed) == ("armed", 2)

    third = take("completion", 103)
    history.claim(work, 2)  # the lease ran out and another worker took the work over
    script.follow(alive={103})
    assert (script.stales[0].step, script.stales[0].superseded_by) == ("released", 2)
    assert (script.dir / f"completion.{third}.go").exists()
    assert not (script.dir / f"completion.{first}.go").exists(), "an old taker stays stopped"
    write_ready(script.dir / f"completion.{third}.done", {"pid": 103})
    script.follow(alive={103})
    assert [s.step for s in script.stales] == ["done", "armed"]
    assert script.pending and "transcript write was never made" in script.problems()[0]
    history.close()


def test_a_pending_scripted_write_keeps_one_more_assignment_coming(tmp_path):
    """The soak's end is tied to the scripted write, not the clock: when every assignment is
    finished before a turn took the armed token (a loaded machine), chaos goes on and one more
    is admitted, up to ``most_items``; the invariants count what was admitted."""
    config = Config(
        2, 2, tmp_path, "solutions", 2, 12, 1.5, CHAOS_EVERY, PAUSE_SHARE, ("transcript",)
    )
    soak = Soak(config, leases=None, directory=tmp_path)
    left = {"unfinished": 0}
    soak.unfinished = lambda: left["unfinished"]  # the shop's count, without a shop
    soak.enqueued = config.items  # all admitted, all finished, the write still pending
    assert soak.chaos_goes_on(1.0) and soak.admitting == config.items, "inside its seconds"
    assert soak.chaos_goes_on(3.0) and soak.admitting == config.items + 1
    assert soak.chaos_goes_on(3.1) and soak.admitting == config.items + 1, "one at a time"
    soak.enqueued, left["unfinished"] = config.items + 1, 1
    assert soak.chaos_goes_on(3.2) and soak.admitting == config.items + 1, "a turn is under way"
    left["unfinished"] = 0
    assert not soak.chaos_goes_on(config.seconds + SCRIPT_SECONDS), "the script gives up"
    assert config.most_items == 2 * config.items
    soak.admitting = soak.enqueued = config.most_items
    assert not soak.chaos_goes_on(3.3), "at most twice the items asked for"
    soak.admitting = soak.enqueued = config.items
    soak.script.stales[0].step = "done"
    assert not soak.chaos_goes_on(3.4) and soak.admitting == config.items, "the write was made"
    unscripted = Config(2, 2, tmp_path, "solutions", 2, 12, 1.5, CHAOS_EVERY, PAUSE_SHARE)
    assert unscripted.most_items == unscripted.items


HOLD_THEN_COMMIT = """
import sys, time
from lucyshop.store import connect
db = connect(sys.argv[1])
db.execute("BEGIN IMMEDIATE")
print("holding", flush=True)
time.sleep(0.3)
db.execute("COMMIT")
"""


def test_the_end_of_chaos_continues_a_paused_lock_holder_before_it_waits_for_the_feeder(tmp_path):
    """A worker stopped inside a write transaction holds SQLite's write lock until it is
    continued, and the feeder's last admission waits for that lock. Chaos ends by continuing
    the worker first: the feeder gets the lock at once, rather than at the end of its busy
    timeout (a CI failure: the soak joined the feeder first and waited 15 s)."""
    config = Config(2, 2, tmp_path, "solutions", 1, 4, 1.5, CHAOS_EVERY, PAUSE_SHARE)
    soak = Soak(config, leases=None, directory=tmp_path)
    shop = tmp_path / "shop.db"
    connect(shop).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THEN_COMMIT, str(shop)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "holding\n"
        holder.send_signal(signal.SIGSTOP)
        soak.slots[0].proc, soak.slots[0].paused_until = holder, time.monotonic() + 60
        budget_s, outcome = 8, {}

        def feed() -> None:
            db = connect(shop)
            patient(db, budget_s * 1000)
            try:
                with db.immediate():
                    outcome["admitted"] = time.monotonic()
            except WriteLockTimeout as error:
                outcome["error"] = error
            finally:
                db.close()

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        time.sleep(0.2)  # the feeder is waiting for the lock
        began = time.monotonic()
        soak.end_chaos(threading.Event(), feeder)
        took = time.monotonic() - began
        assert "error" not in outcome, outcome
        assert took < budget_s / 2, f"end_chaos took {took:.1f} s: it waited out the feeder"
        assert soak.slots[0].paused_until is None and soak.counts.resumes == 1
        assert holder.wait(timeout=10) == 0
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_a_feeder_still_admitting_after_chaos_is_a_harness_failure(tmp_path, monkeypatch):
    """The end of chaos waits a grace for the feeder; one still running after it is named as
    a failed admission (the first invariant's), not left to admit beside the drain unseen."""
    monkeypatch.setattr(chaos, "FEEDER_GRACE", 0.2)
    config = Config(2, 2, tmp_path, "solutions", 1, 4, 1.5, CHAOS_EVERY, PAUSE_SHARE)
    soak = Soak(config, leases=None, directory=tmp_path)
    release = threading.Event()
    feeder = threading.Thread(target=release.wait, args=(10,), daemon=True)
    feeder.start()
    try:
        soak.end_chaos(threading.Event(), feeder)
    finally:
        release.set()
        feeder.join(10)
    first = soak.harness_problems()[0]
    assert first.startswith("admission failed: TimeoutError: the feeder was still admitting 0.2 s")
