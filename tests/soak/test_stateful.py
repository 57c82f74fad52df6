"""A model of who may write when, compared with claim, assert_current, observe, finish,
recover_once.

Hypothesis drives a real shop file through random sequences of enqueue, claim (several owners,
a shared label among them, several sessions), clock steps, and writes with claims old and new.
A small model in plain Python decides, before each call, what must happen: which item a claim
gets and at which generation, and whether a write is the current holder's (accepted) or not
(refused with PermissionError and nothing written). After every step the rows are read back
and compared with the model.

Every function is called as the chapter calls it. Two clocks, so no lease ends near a call:
``claim`` and ``assert_current`` take the model's clock (``now=``), which starts at 1,000,000 s
(1970-01-12) and moves in steps; ``observe``, ``finish`` and ``recover_once`` read the wall
clock, to which a lease claimed in 1970 ran out long ago. A claim with no ``now`` (a live
claim, at least ``LIVE_TTL_LEAST`` long) is current on the wall clock too, and the model's
clock may jump to its expiry, after which every lease is in the wall clock's future. So each
expiry is either decades past or minutes ahead of the wall clock while an example runs. The
test below it runs the same machine against mutants of the reference and expects each to be
caught.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)
from mutants import BY_NAME

from lucyshop.lab.given.orders import OWNER, POLICY
from lucyshop.lab.loader import load_impl

T0 = 1_000_000.0
OWNERS = (OWNER, OWNER, "ann", "bob")  # the shared service name comes up most
SESSIONS = ("session-a", "session-b", "session-c")
RESCUER = "rescuer"
SCRATCH = Path("/dev/shm") if Path("/dev/shm").is_dir() else None  # fsyncs are free there

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.text(max_size=12)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
ttls = st.sampled_from([0.5, 1.0, 30.0, 90.0, 3600.0]) | st.floats(min_value=0.001, max_value=200.0)
LIVE_TTL_LEAST = 600.0  # far longer than an example runs, so a live claim stays live in it
# The n-th live claim of an example gets LIVE_TTL_LEAST + LIVE_SPACING * (n % LIVE_ENDS), at
# most claim's 3600: two live leases then end minutes apart, not the wall-clock milliseconds
# between their calls. With equal ttls a clock step after one's end could land before or after
# the other's depending on how fast the calls ran, and the same example would fill ``claims``
# differently when Hypothesis replays it (CI failed on that: FlakyStrategyDefinition).
LIVE_SPACING, LIVE_ENDS = 250.0, 12
results = st.text(max_size=20)  # finish's result is text, stored as given
steps = st.sampled_from([0.0, 0.001, 1.0, 30.0, 90.0]) | st.floats(min_value=0.0, max_value=120.0)


class ModelMismatch(AssertionError):
    """The implementation (or the rows it left) disagrees with the model."""


def expect(what: str, seen: Any, expected: Any) -> None:
    if seen != expected:
        raise ModelMismatch(f"{what}: expected {expected!r}, saw {seen!r}")


@dataclass
class Item:
    session: str
    text: str
    state: str = "pending"
    generation: int = 0
    owner: str | None = None
    expires: float = 0.0


@dataclass
class DeadSupplier:
    """recover_once needs a supplier; no order ever exists here, so any call is a mismatch."""

    identity: str = "dairy"
    timeout: float = 0.1
    calls: list[str] = field(default_factory=list)

    def lookup(self, operation: str) -> None:
        self.calls.append(f"lookup {operation}")
        raise ConnectionError("the supplier is unreachable in this test")

    def order(self, operation: str, proposal: dict) -> dict:
        self.calls.append(f"order {operation}")
        raise ConnectionError("the supplier is unreachable in this test")


class LeaseMachine(RuleBasedStateMachine):
    """Subclassed per implementation: ``leases`` is the module under test."""

    leases: Any = None
    claims = Bundle("claims")

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="ch13-stateful-", dir=SCRATCH))
        self.db, self.queue = self.leases.open_worker_shop(self.dir / "shop.db")
        self.now = T0
        self.items: dict[int, Item] = {}
        self.transcript: list[tuple[int, int, Any]] = []
        self.outcomes: dict[int, tuple[int, str, Any]] = {}
        self.supplier = DeadSupplier()
        self.live = 0  # live claims made so far (LIVE_SPACING)

    def teardown(self) -> None:
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- the model

    def current(self, held: Any, now: float) -> bool:
        """May ``held`` write at ``now``? Running, its owner and generation, its lease unexpired."""
        item = self.items[held.work_id]
        return (
            item.state == "running"
            and item.owner == held.owner
            and item.generation == held.generation
            and item.expires > now
        )

    def next_claim(self, now: float) -> int | None:
        """Oldest pending or expired item, skipping a session with another live holder."""
        for work_id in sorted(self.items):
            item = self.items[work_id]
            if not (item.state == "pending" or (item.state == "running" and item.expires <= now)):
                continue
            if any(
                o.session == item.session
                and other != work_id
                and o.state == "running"
                and o.expires > now
                for other, o in self.items.items()
            ):
                continue
            return work_id
        return None

    def attempt(self, what: str, call: Any) -> tuple[bool, Any]:
        """(True, result) or (False, the PermissionError); any other exception is a mismatch."""
        try:
            return True, call()
        except PermissionError as refused:
            return False, refused
        except Exception as error:
            raise ModelMismatch(f"{what} raised {type(error).__name__}: {error}") from error

    def compare(self, what: str, allowed: bool, outcome: tuple[bool, Any]) -> None:
        accepted, value = outcome
        event(f"{what} {'accepted' if accepted else 'refused'}")  # --hypothesis-show-statistics
        if allowed and not accepted:
            raise ModelMismatch(f"{what} by the current holder was refused: {value}")
        if not allowed and accepted:
            raise ModelMismatch(f"{what} by a claim that is not current was accepted")

    # -- rules

    @initialize(sessions=st.lists(st.sampled_from(SESSIONS), min_size=1, max_size=6))
    def open_the_queue(self, sessions: list[str]) -> None:
        for session in sessions:
            self.enqueue(session)

    @rule(session=st.sampled_from(SESSIONS))
    def add_assignment(self, session: str) -> None:
        self.enqueue(session)

    def enqueue(self, session: str) -> None:
        n = len(self.items)
        text = f"assignment {n} in {session}"
        work_id = self.leases.enqueue(self.queue, f"source-{n}", session, text)
        expect("a new assignment's work id is new", work_id in self.items, False)
        self.items[work_id] = Item(session, text)

    @rule(target=claims, owner=st.sampled_from(OWNERS), ttl=ttls)
    def claim(self, owner: str, ttl: float):
        return self.take(owner, ttl)

    @rule(target=claims, owner=st.sampled_from(OWNERS))
    def claim_on_the_wall_clock(self, owner: str):
        """The chapter's usual claim, with no ``now``: a lease live on the wall clock."""
        ttl = LIVE_TTL_LEAST + LIVE_SPACING * (self.live % LIVE_ENDS)
        self.live += 1
        before = time.time()
        expected = self.next_claim(before)
        _, held = self.attempt("claim", lambda: self.leases.claim(self.db, owner, ttl=ttl))
        after = time.time()
        if expected is None:
            expect("claim with nothing eligible", held, None)
            return multiple()
        if held is None:
            raise ModelMismatch(f"claim got nothing; work {expected} was eligible")
        expect(
            "lease of a claim on the wall clock", before + ttl <= held.expires <= after + ttl, True
        )
        return self.record(held, expected, owner, held.expires)

    @rule(target=claims, held=claims, ttl=ttls)
    def same_owner_takes_over(self, held: Any, ttl: float):
        """The chapter's story: a lease runs out and the same service name claims again."""
        self.now = max(self.now, held.expires)
        return self.take(held.owner, ttl)

    def take(self, owner: str, ttl: float):
        expected = self.next_claim(self.now)
        _, held = self.attempt(
            "claim", lambda: self.leases.claim(self.db, owner, ttl=ttl, now=self.now)
        )
        if expected is None:
            expect("claim with nothing eligible", held, None)
            return multiple()
        if held is None:
            raise ModelMismatch(f"claim got nothing; work {expected} was eligible")
        return self.record(held, expected, owner, self.now + ttl)

    def record(self, held: Any, expected: int, owner: str, expires: float) -> Any:
        """Compare a claim with the item the model expected, then hold it in the model."""
        item = self.items[expected]
        expect("claimed work id", held.work_id, expected)
        expect("claimed generation", held.generation, item.generation + 1)
        expect(
            "claim (owner, session, text, expires)",
            (held.owner, held.session_id, held.text, held.expires),
            (owner, item.session, item.text, expires),
        )
        expect("worker_id", held.worker_id, f"{owner}#{item.generation + 1}")
        item.state, item.generation, item.owner, item.expires = (
            "running",
            held.generation,
            owner,
            held.expires,
        )
        return held

    @rule(dt=steps)
    def advance(self, dt: float) -> None:
        self.now += dt

    @rule(held=claims, early=st.booleans())
    def advance_to_expiry(self, held: Any, early: bool) -> None:
        """Land on a lease's boundary: a hair before it (still alive) or exactly on it (expired)."""
        target = held.expires - 0.001 if early else held.expires
        self.now = max(self.now, target)

    @rule(held=claims)
    def assert_current(self, held: Any) -> None:
        allowed = self.current(held, self.now)
        outcome = self.attempt(
            "assert_current", lambda: self.leases.assert_current(self.db, held, self.now)
        )
        self.compare("assert_current", allowed, outcome)
        if allowed:
            expect("assert_current returns the lease's expiry", outcome[1], held.expires)

    @rule(held=claims, message=json_values)
    def observe(self, held: Any, message: Any) -> None:
        allowed = self.current(held, time.time())
        outcome = self.attempt("observe", lambda: self.leases.observe(self.db, held, message))
        self.compare("observe", allowed, outcome)
        if allowed:
            self.transcript.append((held.work_id, held.generation, message))

    @rule(held=claims, status=st.sampled_from(["DONE", "BLOCKED", "CANCELED"]), result=results)
    def finish(self, held: Any, status: str, result: str) -> None:
        allowed = self.current(held, time.time())
        outcome = self.attempt("finish", lambda: self.leases.finish(self.db, held, status, result))
        self.compare("finish", allowed, outcome)
        if allowed:
            self.items[held.work_id].state = "finished"
            self.outcomes[held.work_id] = (held.generation, status, result)

    @rule()
    def recover_once(self) -> None:
        """A claim on the wall clock, then BLOCKED at once: no order exists to continue."""
        expected = self.next_claim(time.time())
        _, recovery = self.attempt(
            "recover_once",
            lambda: self.leases.recover_once(
                self.db, owner=RESCUER, supplier=self.supplier, policy=POLICY
            ),
        )
        expect("supplier calls during recovery (there are no orders)", self.supplier.calls, [])
        if expected is None:
            expect("recover_once with nothing eligible", recovery, {"status": "IDLE"})
            return
        item = self.items[expected]
        expect(
            "recovery",
            recovery,
            {"status": "BLOCKED", "work": expected, "generation": item.generation + 1},
        )
        item.state, item.generation, item.owner = "finished", item.generation + 1, RESCUER
        row = self.db.execute(
            "SELECT result FROM outcomes WHERE work_id = ?", (expected,)
        ).fetchone()
        result = None if row is None else row[0]
        self.outcomes[expected] = (item.generation, "BLOCKED", result)
        expect("recovery's outcome says why it blocked, as text", bool(result), True)

    # -- read back after every step

    @invariant()
    def rows_match_the_model(self) -> None:
        db = self.db
        states = {r[0]: r[1] for r in db.execute("SELECT work_id, state FROM work")}
        expect("work states", states, {w: i.state for w, i in self.items.items()})
        leases = {
            r[0]: (r[1], r[2])
            for r in db.execute("SELECT work_id, generation, worker_id FROM assignment_leases")
        }
        expect(
            "lease rows (generation, worker_id)",
            leases,
            {
                w: (i.generation, f"{i.owner}#{i.generation}")
                for w, i in self.items.items()
                if i.generation
            },
        )
        holders = {
            r[0]: r[1]
            for r in db.execute("SELECT work_id, worker_id FROM work WHERE state != 'pending'")
        }
        expect("work rows name their lease's holder", holders, {w: v[1] for w, v in leases.items()})
        running = {
            r[0]: r[1]
            for r in db.execute(
                "SELECT l.work_id, l.expires FROM assignment_leases l JOIN work w USING (work_id)"
                " WHERE w.state = 'running'"
            )
        }
        expect(
            "running leases expire when claimed",
            running,
            {w: i.expires for w, i in self.items.items() if i.state == "running"},
        )
        transcript = [
            (r[0], r[1], json.loads(r[2]))
            for r in db.execute("SELECT work_id, generation, message FROM transcript ORDER BY seq")
        ]
        expect("transcript rows", transcript, self.transcript)
        outcomes = {
            r[0]: (r[1], r[2], r[3])
            for r in db.execute("SELECT work_id, generation, status, result FROM outcomes")
        }
        expect("outcome rows", outcomes, self.outcomes)


def machine_for(leases: Any) -> type[LeaseMachine]:
    return type("LeaseMachineFor" + leases.__name__, (LeaseMachine,), {"leases": leases})


def test_reference_agrees_with_the_model_of_who_may_write_when():
    run_state_machine_as_test(
        machine_for(load_impl("solutions")),
        settings=settings(
            max_examples=100,
            stateful_step_count=60,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


# Left out on purpose, as no sequence of these calls can tell them from the reference:
# assert_current_identity and assert_current_generation, because the worker id compared is
# ``owner#generation`` and generations grow on every claim, so either comparison alone refuses
# every holder the pair refuses (only ``cancel``, not modelled here, writes another label);
# claim_expiry_clause, because the claim's session clause already counts the item itself, so
# running work under a live lease stays unclaimable without the expiry clause.
CAUGHT = (
    "assert_current_state",
    "assert_current_expiry",
    "claim_generation_increment",
    "claim_session_clause",
    "observe_fence",
    "finish_fence",
    "worker_id_without_generation",
)


@pytest.mark.parametrize("name", CAUGHT)
def test_the_model_catches_a_mutant(name, tmp_path):
    machine = machine_for(load_impl(BY_NAME[name].write(tmp_path)))
    with pytest.raises(ModelMismatch):
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=300,
                stateful_step_count=40,
                deadline=None,
                database=None,
                phases=[Phase.generate],
                report_multiple_bugs=False,
                print_blob=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
