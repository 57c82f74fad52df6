"""Chapter 13 checkpoint: kill, pause and out-live real workers, and recover their work.

    python checkpoints/ch13_worker_recovery.py [--impl learner|solutions|PATH]
                                               [--evidence FILE] [--lease SECONDS] [--case N]
                                               [--keep DIR]

Read it top to bottom: each case is one function, in the order the chapter tells them, and its
docstring says what it proves. Their numbers and names (``--case N``, the lines printed) are
listed once, in ``lucyshop.lab.checkpoint.cases``; the world a process case runs in (a shop
file, a supplier process, the worker child) is ``lucyshop.lab.checkpoint.shop.Shop``, and the
command line, the sandboxes and the evidence are ``lucyshop.lab.checkpoint.runner``'s.

Every process here runs the implementation you chose with the reference solutions blocked,
this parent included. Each case gets its own directory, shop file and supplier process, and
every wait has a deadline. Nothing rewrites the clock or the database behind the workers'
backs: a case that out-lives a holder's lease waits for it to run out in real time.

Exit status: 0 every case passed, 1 a case failed, 3 the implementation is still a stub.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

from lucyshop import approval
from lucyshop.lab.checkpoint.cases import (
    ARITHMETIC,
    CANCEL,
    FENCE,
    KILLED,
    LIVE_STALE,
    PAUSED,
    POST_COMMIT,
)
from lucyshop.lab.checkpoint.expectations import (
    WRITES,
    ExpectationFailed,
    claimed,
    expect,
    expect_refused,
)
from lucyshop.lab.checkpoint.judge import kept_directory
from lucyshop.lab.checkpoint.rival import WRITERS, RivalAtEveryMoment, RivalWrong
from lucyshop.lab.checkpoint.runner import Run, main
from lucyshop.lab.checkpoint.shop import Shop, stopped
from lucyshop.lab.given.orders import OPERATOR, OWNER, POLICY
from lucyshop.lab.sandbox import sandboxed_shop
from lucyshop.lab.sandbox.inside.holder import DEADLINE, refusal
from lucyshop.lab.sandbox.jail import signal_inside
from lucyshop.lab.services.processes import wait_until
from lucyshop.supplier import ledger_orders

# ------------------------------------------------------------------ no processes


def arithmetic(run: Run, leases: Any, _directory: Path) -> dict[str, Any]:
    """Part A's arithmetic is right on ten turns small enough to work out by hand: percentiles,
    the share of false expiries, the shortest safe lease, the detection delay, fenced()."""
    turns = [
        0.9,
        0.3,
        0.5,
        1.2,
        0.4,
        0.7,
        2.0,
        0.6,
        0.8,
        1.0,
    ]  # sorted: .3 .4 .5 .6 .7 .8 .9 1 1.2 2
    expect("percentile(turns, 50)", leases.percentile(turns, 50), 0.7)
    expect("percentile(turns, 90)", leases.percentile(turns, 90), 1.2)
    expect("percentile(turns, 100)", leases.percentile(turns, 100), 2.0)
    expect("false_expiry_share(turns, 0.8)", leases.false_expiry_share(turns, 0.8), 0.4)
    expect("false_expiry_share(turns, 2.0)", leases.false_expiry_share(turns, 2.0), 0.0)
    expect("shortest_lease(turns, 0.1)", leases.shortest_lease(turns, 0.1), 1.2)
    expect("shortest_lease(turns, 0)", leases.shortest_lease(turns, 0), 2.0)
    delay = leases.detection_delay(4.0, 1.0, 0.2)
    expect("detection_delay(4.0, 1.0, 0.2) rounded", round(delay, 9), 3.6)
    expect("fenced(1, 2)", leases.fenced(1, 2), True)
    expect("fenced(2, 2)", leases.fenced(2, 2), False)
    run.event(ARITHMETIC.tag, "figures as expected", detection_delay=delay)
    return {
        "p50": leases.percentile(turns, 50),
        "p90": leases.percentile(turns, 90),
        "detection_delay": delay,
    }


def fence(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """A reacquired lease fences the old claim: once generation 2 holds the work, generation
    1's transcript row and completion are refused, and the session's next turn waits for the
    first. One process, time injected with ``now=`` so the expiry is exact (and said so).
    Then a rival takes the next turn over between any two statements of its holder's
    ``observe`` and ``finish``: nothing is written after it."""
    db, queue = sandboxed_shop(leases, directory / "shop.db")
    first = leases.enqueue(queue, "fence-1", "session-a", "turn one")
    second = leases.enqueue(queue, "fence-2", "session-a", "turn two")
    t0, ttl = 1_000_000.0, 30.0
    old = leases.claim(db, OWNER, ttl=ttl, now=t0)
    expect("first claim", claimed(old), {"work_id": first, "generation": 1})
    expect(
        "competing claim while the lease is alive",
        leases.claim(db, "rival", ttl=ttl, now=t0 + 1),
        None,
    )
    new = leases.claim(db, OWNER, ttl=ttl, now=t0 + ttl)  # injected: the instant it expires
    expect("same owner reacquires expired work", claimed(new), {"work_id": first, "generation": 2})
    refused = {}
    for boundary, write in (
        (
            "transcript",
            lambda: leases.observe(
                db, old, {"role": "assistant", "text": "stale"}, now=t0 + ttl + 1
            ),
        ),
        ("completion", lambda: leases.finish(db, old, "DONE", {"by": "stale"}, now=t0 + ttl + 1)),
    ):
        refused[boundary] = refusal(write)
    expect_refused(refused, ("completion", "transcript"), "generation 2 took the work")
    expect(
        "second turn of the session waits",
        leases.claim(db, "rival", ttl=ttl, now=t0 + ttl + 2),
        None,
    )
    leases.observe(db, new, {"role": "assistant", "text": "current"}, now=t0 + ttl + 2)
    leases.finish(db, new, "DONE", {"by": "generation 2"}, now=t0 + ttl + 3)
    nxt = leases.claim(db, OWNER, ttl=ttl, now=t0 + ttl + 4)
    expect("next turn claimed", claimed(nxt), {"work_id": second, "generation": 1})
    generations = [
        r[0] for r in db.execute("SELECT generation FROM transcript WHERE work_id = ?", (first,))
    ]
    expect("transcript generations of the first turn", generations, [2])
    outcome = db.execute(
        "SELECT generation, status FROM outcomes WHERE work_id = ?", (first,)
    ).fetchone()
    written = None if outcome is None else {"generation": outcome[0], "status": outcome[1]}
    expect("outcome written by generation 2", written, {"generation": 2, "status": "DONE"})
    run.event(FENCE.tag, "stale generation refused", **refused)
    rivals = _between_check_and_write(leases, db, nxt, kept_directory(directory), t0 + ttl + 5)
    run.event(FENCE.tag, "no write after a takeover between holder check and write", **rivals)
    return {
        "time": "injected with now=",
        "generations": [old.generation, new.generation],
        "next_turn_generation": nxt.generation,
        "refused": refused,
        "transcript_generations": generations,
        "rival_runs": rivals,
    }


def _between_check_and_write(
    leases: Any, db: Any, held: Any, kept: Path, now: float
) -> dict[str, int]:
    """The holder check and its write are one transaction: on copies of the shop only this
    process opens (kept for the judge), a rival takes ``held``'s work over before each
    statement of ``observe``, then of ``finish``, in turn, at moments this side picks; no
    row may be written after it. How many runs each writer had."""
    probes = leases._sandbox.kit("lucyshop.lab.sandbox.inside.shop_probes")
    calls = {
        "observe": lambda connection: leases.observe(connection, held, "observed", now=now),
        "finish": lambda connection: leases.finish(connection, held, "DONE", {}, now=now),
    }
    counted = {}
    for writer, call in calls.items():
        home = kept / f"rival-{writer}"
        home.mkdir()
        rival = RivalAtEveryMoment(probes, db, held, WRITERS[writer], home)
        try:
            counted[writer] = len(rival.attempt(call, f"{writer}'s write"))
        except RivalWrong as wrong:
            raise ExpectationFailed(
                f"{writer}() beside a rival", "no row after a takeover", str(wrong)
            )
    return counted


# ------------------------------------------------------------------ real processes, real leases


def killed_holder(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """A worker SIGKILLed while it holds approved work loses nothing and repeats nothing: the
    replacement waits out the real lease and finishes the order from the records alone, no
    model asked; the supplier holds one order, and a second recovery finds nothing to do."""
    with Shop(run, leases, directory, KILLED) as shop:
        ready, status = shop.kill_holder()
        before = approval.account(shop.db)
        recovery, waited, calls = shop.recover_after_expiry(ready)
        facts = shop.settled(ready, recovery, before)
        again = leases.recover_once(shop.db, owner=OWNER, supplier=shop.client, policy=POLICY)
        expect("a second recovery", again.status, "IDLE")
        return facts | {
            "child_pid": ready["pid"],
            "exit_status": status,
            "waited_seconds": waited,
            "model_calls": calls,
            "second_recovery": again.status,
        }


def live_stale_holder(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """A holder that was only slow cannot write after the takeover: alive all along, it tries
    its transcript row, its completion and the supplier send once the replacement has
    finished, and each is refused; the supplier still holds one order."""
    with Shop(run, leases, directory, LIVE_STALE) as shop:
        child, ready = shop.start_holder()
        shop.competing_claim_gets_nothing()
        before = approval.account(shop.db)
        recovery, waited, calls = shop.recover_after_expiry(ready)
        facts = shop.settled(ready, recovery, before)
        stale = shop.release(child)
        expect_refused(stale, WRITES, "the replacement took the work")
        facts |= shop.unchanged_after_stale(ready)
        return facts | {
            "child_pid": ready["pid"],
            "waited_seconds": waited,
            "model_calls": calls,
            "stale_child_reported": stale,
        }


def paused_holder(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """A holder paused past its lease cannot send: SIGSTOPped just before its send, it is
    SIGCONTinued once a replacement holds the work, and its writes and its send are refused.

    For a moment two live workers believe they hold the same work. Only the generation in
    ``worker_id`` tells chapter 11's unchanged holder check which one may send.
    """
    with Shop(run, leases, directory, PAUSED) as shop:
        child, ready = shop.start_holder()
        signal_inside(child, signal.SIGSTOP)
        expect(
            "holder is stopped",
            wait_until(lambda: stopped(child), timeout=DEADLINE, what="the holder to stop"),
            True,
        )
        shop.event("holder stopped", pid=child.pid)
        before = approval.account(shop.db)
        waited = shop.wait_for_expiry(ready)
        takeover = leases.claim(shop.db, OWNER, ttl=30)
        expect(
            "replacement takes over", claimed(takeover), {"work_id": shop.work_id, "generation": 2}
        )
        shop.event("replacement holds the work", generation=takeover.generation)
        signal_inside(child, signal.SIGCONT)
        shop.event("holder continued", pid=child.pid)
        stale = shop.release(child)
        expect_refused(stale, WRITES, "the replacement took the work")
        expect(
            "supplier ledger after the stale send", len(ledger_orders(shop.supplier.database)), 0
        )
        receipt = approval.execute(shop.db, takeover, ready["order_id"], shop.client, policy=POLICY)
        leases.finish(shop.db, takeover, "DONE", {"receipt": receipt["status"]})
        shop.event(
            "replacement finished",
            status=receipt["status"],
            generation=takeover.generation,
        )
        recovery = leases.Recovery("DONE", takeover.work_id, takeover.generation)
        facts = shop.settled(ready, recovery, before)
        return facts | {
            "child_pid": ready["pid"],
            "waited_seconds": waited,
            "stale_child_reported": stale,
        }


def crash_after_remote_acceptance(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """A crash after the supplier committed the order (its reply held back, the holder killed
    before it recorded a receipt) is settled by a lookup, not a second order."""
    with Shop(run, leases, directory, POST_COMMIT) as shop:
        shop.supplier.set_faults(delay_next=1, delay_seconds=DEADLINE)
        child, ready = shop.start_holder()
        wait_until(
            lambda: ledger_orders(shop.supplier.database),
            timeout=DEADLINE,
            what="the supplier to commit the order",
        )
        shop.event("supplier committed; reply held back")
        status = shop.kill(child)
        order = approval.get_order(shop.db, ready["order_id"])["status"]
        expect("order left uncertain by the crash", order, "SENDING")
        before = approval.account(shop.db)
        recovery, waited, calls = shop.recover_after_expiry(ready)
        facts = shop.settled(ready, recovery, before)
        return facts | {
            "child_pid": ready["pid"],
            "exit_status": status,
            "order_after_crash": order,
            "waited_seconds": waited,
            "model_calls": calls,
        }


def cancel(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """An operator's cancel fences a live worker: its unsent order is revoked and its stale
    writes refused, and the order already at the supplier (its reply lost) is reconciled."""
    with Shop(run, leases, directory, CANCEL) as shop:
        shop.supplier.set_faults(drop_next=1)  # the first order is committed, its reply lost
        child, ready = shop.start_holder()
        sent, unsent = (
            approval.get_order(shop.db, ready[k]) for k in ("order_id", "second_order_id")
        )
        expect(
            "orders before the cancel",
            {"sent": sent["status"], "unsent": unsent["status"]},
            {"sent": "UNKNOWN", "unsent": "APPROVED"},
        )
        cancelled = leases.cancel(
            shop.db,
            shop.work_id,
            actor=OPERATOR,
            policy=POLICY,
            reason="the customer called to cancel",
        )
        shop.event("operator cancelled", generation=cancelled["generation"])
        lease = shop.db.execute(
            "SELECT generation FROM assignment_leases WHERE work_id = ?", (shop.work_id,)
        ).fetchone()[0]
        expect("lease generation advanced by the cancel", lease, ready["generation"] + 1)
        outcome = shop.db.execute(
            "SELECT status FROM outcomes WHERE work_id = ?", (shop.work_id,)
        ).fetchone()[0]
        expect("outcome", outcome, "CANCELED")
        after = [approval.get_order(shop.db, o["id"])["status"] for o in (sent, unsent)]
        expect("sent order left for reconcile, unsent one revoked", after, ["UNKNOWN", "REVOKED"])
        expect(
            "reservation kept for the uncertain order",
            approval.account(shop.db)["reserved_cents"],
            sent["amount_cents"],
        )
        stale = shop.release(child)
        expect_refused(stale, WRITES, "the operator cancelled the work")
        settled = leases.reconcile(shop.db, shop.client)
        shop.event("reconciled", orders=[(r["operation"], r["after"]) for r in settled])
        expect(
            "reconcile settles the sent order",
            [(r["operation"], r["after"]) for r in settled],
            [(sent["operation"], "ACCEPTED")],
        )
        ledger = [row["operation"] for row in ledger_orders(shop.supplier.database)]
        expect("supplier ledger", ledger, [sent["operation"]])
        money = approval.account(shop.db)
        expect(
            "money after reconcile",
            {"reserved_cents": money["reserved_cents"], "spent_cents": money["spent_cents"]},
            {"reserved_cents": 0, "spent_cents": sent["amount_cents"]},
        )
        return {
            "child_pid": ready["pid"],
            "generations": [ready["generation"], lease],
            "outcome": outcome,
            "orders_after_cancel": after,
            "reconciled": settled,
            "ledger_count": len(ledger),
            "ledger_operations": ledger,
            "stale_child_reported": stale,
            "reserved_cents": money["reserved_cents"],
            "spent_cents": money["spent_cents"],
        }


if __name__ == "__main__":
    sys.exit(main(globals()))
