"""Chapter 13 checkpoint: kill, pause and out-live real workers, and recover their work.

    python checkpoints/ch13_worker_recovery.py [--impl learner|solutions|PATH]
                                               [--evidence FILE] [--lease SECONDS] [--case N]
                                               [--keep DIR]

Read it top to bottom: each case is one function, in the order the chapter tells them, and its
docstring says what it proves. Their numbers and names (``--case N``, the lines printed) are
listed once, in ``lucyshop.lab.checkpoint.cases``; the world a process case runs in (a shop
file, a supplier process, the worker child) is ``lucyshop.lab.checkpoint.shop.Shop``, and the
command line, the sandboxes and the evidence are ``lucyshop.lab.checkpoint.runner``'s.

Every chapter function is called as the chapter calls it. Every process here runs the
implementation you chose with the reference solutions blocked, this parent included. Each case
gets its own directory, shop file and supplier process, and every wait has a deadline. Nothing
rewrites the clock or the database behind the workers' backs: time enters only through the
``now`` that ``claim`` takes (the fence case claims in the past), and a case that out-lives a
holder's lease waits for it to run out in real time. The paused holder, the crash after remote
acceptance and the cancel are the kit's own cases, beyond the book; their lines say so.

Exit status: 0 every case passed, 1 a case failed, 3 the implementation is still a stub.
"""

from __future__ import annotations

import signal
import sys
import time
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
from lucyshop.lab.given.exercise_kit import attempt
from lucyshop.lab.given.orders import OPERATOR, OWNER, POLICY
from lucyshop.lab.sandbox import sandboxed_shop
from lucyshop.lab.sandbox.jail import signal_inside
from lucyshop.lab.services.limits import WAIT_SECONDS
from lucyshop.lab.services.processes import wait_until
from lucyshop.supplier import ledger_orders

LEASE = 600.0  # the fence case's lease: longer than the case runs, so only claim's now ends one

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
    """A reacquired lease fences the old claim, as the chapter's checkpoint tests it: the same
    owner label claims expired work again as generation 2, and while generation 2 holds it,
    generation 1's transcript row and completion are refused and the session's next turn
    waits. Time comes in only through ``claim``'s ``now``: generation 1 is claimed so far in
    the past that its lease had run out before the case began (and, until generation 2
    arrives, its own writes are refused by the expiry); everything else runs on the wall clock.
    Then a rival takes the next turn over between any two statements of its holder's
    ``observe`` and ``finish``: nothing is written after it."""
    db, queue = sandboxed_shop(leases, directory / "shop.db")
    first = leases.enqueue(queue, "fence-1", "session-a", "turn one")
    second = leases.enqueue(queue, "fence-2", "session-a", "turn two")
    past = time.time() - 2 * LEASE
    old = leases.claim(db, OWNER, ttl=LEASE, now=past)
    expect("first claim", claimed(old), {"work_id": first, "generation": 1})
    expect(
        "competing claim while the lease is alive",
        leases.claim(db, "rival", ttl=LEASE, now=past + 1),
        None,
    )
    expired = {"transcript": attempt(lambda: leases.observe(db, old, _assistant("expired")))}
    expect_refused(expired, ("transcript",), "its lease ran out")
    new = leases.claim(db, OWNER, ttl=LEASE)
    expect("same owner reacquires expired work", claimed(new), {"work_id": first, "generation": 2})
    refused = {
        "transcript": attempt(lambda: leases.observe(db, old, _assistant("stale"))),
        "completion": attempt(lambda: leases.finish(db, old, "DONE", "finished by generation 1")),
    }
    expect_refused(refused, ("completion", "transcript"), "generation 2 took the work")
    expect("second turn of the session waits", leases.claim(db, "rival", ttl=LEASE), None)
    leases.observe(db, new, _assistant("current"))
    leases.finish(db, new, "DONE", "finished by generation 2")
    nxt = leases.claim(db, OWNER, ttl=LEASE)
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
    # Each refusal's own words: the reference's name the comparison that refused.
    run.event(FENCE.tag, "expired holder refused", **expired)
    run.event(FENCE.tag, "stale generation refused", **refused)
    rivals = _between_check_and_write(leases, db, nxt, kept_directory(directory))
    run.event(FENCE.tag, "no write after a takeover between holder check and write", **rivals)
    return {
        "time": "generation 1 claimed with now= in the past; the rest on the wall clock",
        "generations": [old.generation, new.generation],
        "next_turn_generation": nxt.generation,
        "expired_refused": expired,
        "refused": refused,
        "transcript_generations": generations,
        "rival_runs": rivals,
    }


def _assistant(text: str) -> dict[str, str]:
    """A transcript message, as the chapter's ``observe`` takes one."""
    return {"role": "assistant", "content": text}


def _between_check_and_write(leases: Any, db: Any, held: Any, kept: Path) -> dict[str, int]:
    """The holder check and its write are one transaction: on copies of the shop only this
    process opens (kept for the judge), a rival takes ``held``'s work over before each
    statement of ``observe``, then of ``finish``, in turn, at moments this side picks; no
    row may be written after it. How many runs each writer had."""
    probes = leases._sandbox.kit("lucyshop.lab.sandbox.inside.shop_probes")
    calls = {
        "observe": lambda connection: leases.observe(connection, held, _assistant("observed")),
        "finish": lambda connection: leases.finish(connection, held, "DONE", "beside a rival"),
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
        facts = shop.settled(ready, recovery["generation"], before)
        again = leases.recover_once(shop.db, owner=OWNER, supplier=shop.client, policy=POLICY)
        expect("a second recovery", again, {"status": "IDLE"})
        return facts | {
            "child_pid": ready["pid"],
            "exit_status": status,
            "waited_seconds": waited,
            "model_calls": calls,
            "second_recovery": again["status"],
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
        facts = shop.settled(ready, recovery["generation"], before)
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
    """Beyond the book (the kit's own case): a holder paused past its lease cannot send.
    SIGSTOPped just before its send, it is SIGCONTinued once a replacement holds the work,
    and its writes and its send are refused.

    For a moment two live workers believe they hold the same work. Only the generation in
    ``worker_id`` tells chapter 11's unchanged holder check which one may send.
    """
    with Shop(run, leases, directory, PAUSED) as shop:
        child, ready = shop.start_holder()
        signal_inside(child, signal.SIGSTOP)
        expect(
            "holder is stopped",
            wait_until(lambda: stopped(child), timeout=WAIT_SECONDS, what="the holder to stop"),
            True,
        )
        shop.event("holder stopped", pid=ready["pid"])
        before = approval.account(shop.db)
        waited = shop.wait_for_expiry(ready)
        takeover = leases.claim(shop.db, OWNER, ttl=30)
        expect(
            "replacement takes over", claimed(takeover), {"work_id": shop.work_id, "generation": 2}
        )
        shop.event("replacement holds the work", generation=takeover.generation)
        signal_inside(child, signal.SIGCONT)
        shop.event("holder continued", pid=ready["pid"])
        stale = shop.release(child)
        expect_refused(stale, WRITES, "the replacement took the work")
        expect(
            "supplier ledger after the stale send", len(ledger_orders(shop.supplier.database)), 0
        )
        receipt = approval.execute(shop.db, takeover, ready["order_id"], shop.client, policy=POLICY)
        leases.finish(shop.db, takeover, "DONE", f"supplier receipt {receipt['status']}")
        shop.event(
            "replacement finished",
            status=receipt["status"],
            generation=takeover.generation,
        )
        facts = shop.settled(ready, takeover.generation, before)
        return facts | {
            "child_pid": ready["pid"],
            "waited_seconds": waited,
            "stale_child_reported": stale,
        }


def crash_after_remote_acceptance(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """Beyond the book (the chapter leaves this position to the finished agent's service
    test): a crash after the supplier committed the order (its reply held back, the holder
    killed before it recorded a receipt) is settled by a lookup, not a second order."""
    with Shop(run, leases, directory, POST_COMMIT) as shop:
        shop.supplier.set_faults(delay_next=1, delay_seconds=WAIT_SECONDS)
        child, ready = shop.start_holder()
        wait_until(
            lambda: ledger_orders(shop.supplier.database),
            timeout=WAIT_SECONDS,
            what="the supplier to commit the order",
        )
        shop.event("supplier committed; reply held back")
        status = shop.kill(child)
        order = approval.get_order(shop.db, ready["order_id"])["status"]
        # SENDING if the kill came first, UNKNOWN if the holder's client timed out first: both
        # leave the order's fate to a lookup, which is what this case is about.
        expect("order left uncertain by the crash", order in approval.UNCERTAIN, True)
        before = approval.account(shop.db)
        recovery, waited, calls = shop.recover_after_expiry(ready)
        facts = shop.settled(ready, recovery["generation"], before)
        return facts | {
            "child_pid": ready["pid"],
            "exit_status": status,
            "order_after_crash": order,
            "waited_seconds": waited,
            "model_calls": calls,
        }


def cancel(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """Beyond the book (the chapter's exercise 2, with the kit's own ``cancel`` and
    ``reconcile``): an operator's cancel fences a live worker; its unsent order is revoked and
    its stale writes refused, and the order already at the supplier (its reply lost) is
    reconciled."""
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
