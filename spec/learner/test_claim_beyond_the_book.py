"""``claim`` beyond the book: what 13b teaches past the chapter's printed code.

The row ``claim (beyond the book)`` of ``make check``: shown and graded, but it never fails
the chapter's ``claim`` row, the checkpoint or ``make check``'s exit status. Taught in 13b §
Hostile input to claim (a label of at most 100 printable characters, a ttl that is a number
and not a bool, an injected ``now`` from 0 to the year 2100, each a ValueError that changes
nothing) and 13b § A claim at any queue length (a claim that walks an index of open work in
age order, added as version 2 of ``LEASE_MIGRATIONS``, instead of sorting the queue).
"""

from __future__ import annotations

import statistics
import time

import pytest
from learner_support import T, refuses, snapshot

from lucyshop.lab.sandbox import sandboxed_shop

HOSTILE_OWNERS = ["  ", "till\n", "till\x00", "till\x1b[2J", "t" * 101, None, 7, b"till", ["till"]]
HOSTILE_OWNER_IDS = ["blank", "newline", "nul", "escape", "101", "none", "int", "bytes", "list"]


@pytest.mark.parametrize("owner", HOSTILE_OWNERS, ids=HOSTILE_OWNER_IDS)
def test_an_owner_that_is_not_a_printable_label_of_at_most_100_is_refused(
    impl, db, add_work, owner
):
    add_work("s1")
    before = snapshot(db)
    with refuses(ValueError, f"claim(db, {owner!r:.40})"):
        impl.claim(db, owner, ttl=30, now=T)
    assert snapshot(db) == before, "a refused claim changes no work and no lease"


@pytest.mark.parametrize("ttl", [True, "30", None], ids=["bool", "str", "none"])
def test_a_ttl_that_is_not_a_number_is_refused(impl, db, add_work, ttl):
    add_work("s1")
    before = snapshot(db)
    with refuses(ValueError, f"claim(db, 'till', ttl={ttl!r})"):
        impl.claim(db, "till", ttl=ttl, now=T)
    assert snapshot(db) == before, "a refused claim changes no work and no lease"


@pytest.mark.parametrize(
    "now",
    [1e300, -1.0, 10**400, 4_102_444_800.5],
    ids=["1e300", "negative", "10**400", "just-past-2100"],
)
def test_an_injected_clock_outside_0_to_the_year_2100_is_refused(impl, db, add_work, now):
    add_work("s1")
    impl.claim(db, "till", ttl=5, now=T)  # a live holder that a far-future clock would expire
    before = snapshot(db)
    with refuses(ValueError, f"claim(db, 'night', now={now!r:.20})"):
        impl.claim(db, "night", ttl=30, now=now)
    assert snapshot(db) == before, "a refused claim changes no work and no lease"


SMALL_SHOP = 200
NEAR_CAPACITY = 9_900  # the queue admits 10,000 open items
ROUNDS = 41
MIN_ROUNDS = 9
MEASURING_SECONDS = 10.0  # then it stops, with at least MIN_ROUNDS: a sorting claim is slow


def fill(db, pending: int, finished: int = 0) -> None:
    """Bulk-load work rows in one transaction: ``finished`` done items, then ``pending`` queued.

    Straight SQL, because admitting 20,000 items one transaction at a time would take the
    test's whole time budget; the student's migrations (and their indexes) see every row.
    """
    items = [
        (f"bulk-{n}", f"session-{n}", "one turn", 0.0, "finished" if n < finished else "pending")
        for n in range(finished + pending)
    ]
    with db.immediate():
        db.executemany(
            "INSERT INTO work(source_id, session_id, text, created, state) VALUES (?, ?, ?, ?, ?)",
            items,
        )


def claim_seconds(impl, db, owner: str) -> float:
    start = time.perf_counter()
    held = impl.claim(db, owner, ttl=600, now=T)
    elapsed = time.perf_counter() - start
    assert held is not None, "a shop with queued work always has something to claim"
    return elapsed


def test_a_claim_near_capacity_costs_about_what_it_costs_on_a_small_shop(impl, db, tmp_path):
    """A claim must not sort the eligible set: with 9,900 items queued (and as many finished) it
    takes at most 8x a claim with 200. A ratio measured here, both shops interleaved, never a
    wall-clock limit. On a quiet machine the reference measures about 1x and the sorting claim
    (the book's query: mutant claim_sorts_the_queue) about 29x; while a class was graded beside
    it the reference once measured 3.2x, which the 3x bound this test had before failed. The
    rounds stop after 10 s (at least 9 of them): the book's claim takes about 0.1 s a call
    on the big shop, and the test must end well inside its deadline on a loaded machine."""
    small, _queue = sandboxed_shop(impl, tmp_path / "small.db")
    try:
        fill(small, SMALL_SHOP)
        fill(db, NEAR_CAPACITY, finished=NEAR_CAPACITY)
        for shop in (small, db):
            # Commits without fsync: the ratio is about the query, not this machine's disk.
            shop.remote.execute("PRAGMA synchronous = OFF")
            claim_seconds(impl, shop, "warm-up")
        times: dict[str, list[float]] = {"small": [], "big": []}
        until = time.monotonic() + MEASURING_SECONDS
        for n in range(ROUNDS):
            if n >= MIN_ROUNDS and time.monotonic() > until:
                break
            order = [("small", small), ("big", db)]
            for name, shop in order if n % 2 else reversed(order):
                times[name].append(claim_seconds(impl, shop, f"w{n}"))
    finally:
        small.close()
    small_ms, big_ms = (1000 * statistics.median(times[k]) for k in ("small", "big"))
    assert big_ms <= 8 * small_ms, (
        f"a claim with {NEAR_CAPACITY} items queued took {big_ms / small_ms:.1f}x a claim with "
        f"{SMALL_SHOP} (medians of {len(times['big'])}: {big_ms:.2f} ms vs {small_ms:.2f} ms):"
        " the claim "
        "sorts or scans the queue; walk an index of open work in age order and stop at the first"
        " eligible item (13b § A claim at any queue length)"
    )
