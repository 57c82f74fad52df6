"""``claim(db, owner, *, ttl=90, now=None)``: one immediate transaction takes the oldest eligible
item.

The chapter's claim, as the book prints it: its refusals are the book's (an owner label
without ``#``, a finite lease of (0, 3600] s). What 13b teaches past it (hostile labels, a
bool ttl, a clock outside [0, 2100], a claim as fast at 9,900 items queued as at 200) is the
row ``claim (beyond the book)``, in ``test_claim_beyond_the_book.py``.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from pathlib import Path

import pytest
from learner_support import (
    T,
    finish_by_sql,
    lease,
    refuses,
    rows,
    snapshot,
    work,
)

from lucyshop.lab.services.processes import SharedGroupChildren, wait_exit, wait_for_file


def test_pending_work_is_claimed_at_generation_1(impl, db, add_work):
    work_id = add_work("s1", "six vanilla tubs")
    held = impl.claim(db, "till", ttl=30, now=T)
    assert held is not None, "one pending item: claim returns it"
    assert (held.work_id, held.session_id, held.text, held.owner, held.generation) == (
        work_id,
        "s1",
        "six vanilla tubs",
        "till",
        1,
    ), f"the claim describes the work, owner and generation 1: {held}"
    assert held.expires == pytest.approx(T + 30), (
        f"expires is now + ttl ({T + 30}), got {held.expires}"
    )
    row = work(db, work_id)
    assert (row["state"], row["worker_id"]) == ("running", "till#1"), (
        f"the work row after the claim: {row}"
    )
    assert lease(db, work_id) == {
        "work_id": work_id,
        "worker_id": "till#1",
        "expires": pytest.approx(T + 30),
        "generation": 1,
    }, f"the lease row after the claim: {lease(db, work_id)}"


def test_nothing_to_claim_returns_none_and_writes_nothing(impl, db):
    assert impl.claim(db, "till", ttl=30, now=T) is None, "an empty queue: claim returns None"
    assert rows(db, "assignment_leases") == [], "an empty claim writes no lease"


def test_finished_work_is_never_claimed(impl, db, add_work):
    work_id = add_work()
    db.execute("UPDATE work SET state = 'running' WHERE work_id = ?", (work_id,))
    finish_by_sql(db, work_id)
    before = snapshot(db)
    assert impl.claim(db, "till", ttl=30, now=T) is None, "finished work is not eligible"
    assert snapshot(db) == before, "a claim that finds nothing changes nothing"


def test_oldest_first(impl, db, add_work):
    ids = [add_work("s1"), add_work("s2"), add_work("s3")]
    got = [impl.claim(db, f"w{n}", ttl=30, now=T).work_id for n in range(3)]
    assert got == ids, f"claims take the oldest work first: {ids}, got {got}"
    assert impl.claim(db, "w4", ttl=30, now=T) is None, "then nothing is left"


def test_expired_running_work_is_taken_over_at_the_next_generation(impl, db, add_work):
    work_id = add_work()
    impl.claim(db, "till", ttl=10, now=T)
    taken = impl.claim(db, "night", ttl=20, now=T + 10.5)
    assert taken is not None and taken.work_id == work_id, "an expired lease may be taken over"
    assert (taken.owner, taken.generation) == ("night", 2), f"the takeover is generation 2: {taken}"
    assert lease(db, work_id) == {
        "work_id": work_id,
        "worker_id": "night#2",
        "expires": pytest.approx(T + 30.5),
        "generation": 2,
    }, f"the lease row names the new holder: {lease(db, work_id)}"
    assert work(db, work_id)["worker_id"] == "night#2", "the work row names the new holder"
    assert len(rows(db, "assignment_leases")) == 1, "one lease row per work item"


def test_a_lease_that_expires_exactly_now_is_claimable(impl, db, add_work):
    work_id = add_work()
    held = impl.claim(db, "till", ttl=30, now=T)
    taken = impl.claim(db, "night", ttl=30, now=held.expires)
    assert taken is not None and (taken.work_id, taken.generation) == (work_id, 2), (
        f"at now == expires ({held.expires}) the lease is over: a rival takes the work at"
        f" generation 2, got {taken}"
    )


def test_each_takeover_adds_one_to_the_generation(impl, db, add_work):
    add_work()
    generations = [impl.claim(db, f"w{n}", ttl=1, now=T + 2 * n).generation for n in range(4)]
    assert generations == [1, 2, 3, 4], (
        f"generations only grow, by one per claim, got {generations}"
    )


def test_live_running_work_is_not_taken(impl, db, add_work):
    work_id = add_work()
    held = impl.claim(db, "till", ttl=30, now=T)
    before = snapshot(db)
    assert impl.claim(db, "night", ttl=30, now=T + 29) is None, (
        "a lease with 1s left is alive: a competing claim gets None"
    )
    assert snapshot(db) == before, "a refused competitor changes nothing"
    assert lease(db, work_id)["worker_id"] == held.worker_id


def test_a_session_with_a_live_holder_waits_while_others_proceed(impl, db, add_work):
    first = add_work("s1", "turn 1")
    second = add_work("s1", "turn 2")
    other = add_work("s2", "other conversation")

    held = impl.claim(db, "a", ttl=30, now=T)
    assert held.work_id == first, f"the oldest item ({first}) is claimed first, got {held}"
    got = impl.claim(db, "b", ttl=30, now=T + 1)
    assert got is not None and got.work_id == other, (
        f"turn 2 of s1 waits for turn 1; s2 proceeds (work {other}), got {got}"
    )
    assert impl.claim(db, "c", ttl=30, now=T + 2) is None, (
        "while turn 1 of s1 is held, turn 2 of s1 is not claimable"
    )
    assert work(db, second)["state"] == "pending"

    finish_by_sql(db, first)
    after = impl.claim(db, "c", ttl=30, now=T + 3)
    assert after is not None and (after.work_id, after.generation) == (second, 1), (
        f"once turn 1 is finished, turn 2 is claimable at generation 1, got {after}"
    )


def test_an_expired_turn_is_retaken_before_the_next_turn_of_its_session(impl, db, add_work):
    first = add_work("s1")
    add_work("s1")
    impl.claim(db, "a", ttl=5, now=T)
    got = impl.claim(db, "b", ttl=5, now=T + 6)
    assert (got.work_id, got.generation) == (first, 2), (
        f"the expired turn 1 is taken over (generation 2) before turn 2 starts, got {got}"
    )


def test_the_owner_label_reused_still_gives_a_new_generation(impl, db, add_work):
    add_work()
    first = impl.claim(db, "till", ttl=10, now=T)
    again = impl.claim(db, "till", ttl=10, now=T + 20)
    assert (again.generation, again.worker_id) == (2, "till#2"), (
        f"the same owner label after expiry is a new execution, till#2, got {again}"
    )
    assert again.worker_id != first.worker_id, "the new execution has another worker_id"


def test_the_clock_defaults_to_now(impl, db, add_work):
    add_work()
    before = time.time()
    held = impl.claim(db, "till", ttl=30)
    after = time.time()
    assert before + 30 <= held.expires <= after + 30, (
        f"expires is time.time() + ttl, got {held.expires}"
    )


@pytest.mark.parametrize("ttl", [0.001, 1, 3600])
def test_a_ttl_above_0_up_to_an_hour_is_accepted(impl, db, add_work, ttl):
    add_work()
    held = impl.claim(db, "till", ttl=ttl, now=T)
    assert held is not None and held.expires == pytest.approx(T + ttl), (
        f"ttl={ttl} is valid, got {held}"
    )


BAD_TTLS = [math.nan, math.inf, -math.inf, 0, -1, 3600.5]


BAD_TTL_IDS = ["nan", "inf", "-inf", "zero", "negative", "over-an-hour"]


@pytest.mark.parametrize("ttl", BAD_TTLS, ids=BAD_TTL_IDS)
def test_a_bad_ttl_is_refused_and_changes_nothing(impl, db, add_work, ttl):
    add_work("s1")
    add_work("s2")
    impl.claim(db, "till", ttl=5, now=T)  # one expired running item and one pending
    before = snapshot(db)
    with refuses(ValueError, f"claim(db, 'night', ttl={ttl!r})"):
        impl.claim(db, "night", ttl=ttl, now=T + 10)
    assert snapshot(db) == before, "a refused claim changes no work and no lease"


BAD_OWNERS = ["", "till#2", "#"]


BAD_OWNER_IDS = ["empty", "hash", "only-hash"]


@pytest.mark.parametrize("owner", BAD_OWNERS, ids=BAD_OWNER_IDS)
def test_a_bad_owner_is_refused_and_changes_nothing(impl, db, add_work, owner):
    add_work("s1")
    add_work("s2")
    impl.claim(db, "till", ttl=5, now=T)
    before = snapshot(db)
    with refuses(ValueError, f"claim(db, {owner!r})"):
        impl.claim(db, owner, ttl=30, now=T + 10)
    assert snapshot(db) == before, "a refused claim changes no work and no lease"


CLAIMER = '''
"""One contender: open the shop, wait for the start signal, claim until nothing is left."""
import sys, time
from pathlib import Path
from lucyshop.lab.loader import load_impl
from lucyshop.lab.services.processes import write_ready

path, owner, go, ready, out = sys.argv[1:6]  # after -c, sys.argv[0] is "-c"
impl = load_impl()  # $LEASES_IMPL: the file under test, inside a sandbox of its own
db, _queue = impl.open_worker_shop(path)
write_ready(ready, {"owner": owner})
deadline = time.monotonic() + 240  # the others may start slowly on a loaded machine
while not Path(go).exists():
    if time.monotonic() > deadline:
        raise SystemExit("no start signal within 240s")
    time.sleep(0.002)
claims = []
for _ in range(100):  # bounded: there are 40 items, so a correct claim stops long before this
    held = impl.claim(db, owner, ttl=600)
    if held is None:
        break
    claims.append([held.work_id, held.generation, held.worker_id])
write_ready(out, {"owner": owner, "claims": claims})
'''


@pytest.mark.slow
def test_claims_are_atomic_under_contention(impl, db, add_work, sandboxed, tmp_path):
    """Four sandboxed processes claim from one file: every item exactly once, at generation 1.

    This process writes nothing into ``tmp_path``, which the sandbox can write too (a name
    planted there could point anywhere): the script goes on the command line, the stderr logs
    into a directory of its own, and the start signal is created, never opened."""
    ids = [add_work(f"session-{n}") for n in range(40)]
    go = tmp_path / "go"
    owners = [f"p{n}" for n in range(4)]
    with tempfile.TemporaryDirectory(prefix="ch13-contention-") as out_of_reach:
        logs = Path(out_of_reach)
        with SharedGroupChildren() as children:
            procs = {}
            for owner in owners:
                log = open(logs / f"{owner}.err", "wb")  # noqa: SIM115 (closed below)
                argv, env = sandboxed(
                    [
                        sys.executable,
                        "-c",
                        CLAIMER,
                        str(tmp_path / "shop.db"),
                        owner,
                        str(go),
                        str(tmp_path / f"{owner}.ready"),
                        str(tmp_path / f"{owner}.json"),
                    ]
                )
                procs[owner] = children.spawn(argv, env=env, stderr=log)
                log.close()
            for owner in owners:
                wait_for_file(tmp_path / f"{owner}.ready", timeout=120, proc=procs[owner])
            os.close(os.open(go, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW))
            results = {
                owner: wait_for_file(tmp_path / f"{owner}.json", timeout=120, proc=procs[owner])
                for owner in owners
            }
            for owner in owners:
                status = wait_exit(procs[owner], timeout=10)
                assert status == 0, (
                    f"{owner} exited {status}: {(logs / f'{owner}.err').read_text()}"
                )

    claimed = [tuple(c) + (owner,) for owner, r in results.items() for c in r["claims"]]
    work_ids = sorted(c[0] for c in claimed)
    assert work_ids == ids, (
        f"40 items, each claimed exactly once: {len(claimed)} claims of {len(set(work_ids))} items"
    )
    for work_id, generation, worker_id, owner in claimed:
        assert (generation, worker_id) == (1, f"{owner}#1"), (
            f"work {work_id}: {worker_id} at {generation}"
        )
    by_work = {c[0]: c[2] for c in claimed}
    leases = rows(db, "assignment_leases", "work_id")
    assert [(r["work_id"], r["worker_id"], r["generation"]) for r in leases] == [
        (w, by_work[w], 1) for w in ids
    ], "the lease table agrees with what each process was told"
    assert {r["state"] for r in rows(db, "work")} == {"running"}
