"""Exercise 5 is graded from the leases the trusted side watches, not from the renewer's own
record of its renewals.

- ``hostile/exercise5_own_records.py``: a bounded renewer that extends no lease and writes the
  record a sound one would (``lease_renewals`` rows, granted ``report=`` entries, a refusal
  once the lease runs out). Graded from that record, exercise 5 read PASSING 14/14; graded from
  what the run's watch saw (``lucyshop.lab.exercises.watch``), the bounded arm's lease and the
  bounded hung turn's were never extended: FAILING, with every unit test passing.

The watch itself is shown on a shop file of the test's own: what it reads is the lease, and a
row recording an end the lease never had is found.
"""

from __future__ import annotations

from contextlib import closing

import pytest
from hostile_checks import (
    ISOLATED,
    hostile,
    with_bodies,
)
from test_hostile_data import UNIT_TESTS_5, failing_tests

from lucyshop.lab.exercises import watch
from lucyshop.lab.exercises.renewal import ends_unrecorded, extensions, stale_extensions
from lucyshop.lab.services.processes import wait_until
from lucyshop.store import connect


@pytest.mark.slow
@ISOLATED
def test_a_record_of_renewals_without_renewals_earns_nothing(tmp_path):
    """The reference's chapter functions, and answers whose bounded renewer only records."""
    answers = tmp_path / "answers.py"
    answers.write_text(
        with_bodies("return _forged()", "exercises.py") + hostile("exercise5_own_records"),
        encoding="utf-8",
    )
    failing = failing_tests(tmp_path, answers, "exercise 5")
    assert not [name for name in failing if name.startswith(UNIT_TESTS_5)], failing
    # its rows say every renewing trial renewed; the watch saw no bounded lease extended
    assert "bounded" in failing["test_the_plain_arm_never_renews_and_the_renewing_arms_do"]
    hung = failing["test_the_bounded_renewer_lets_a_hung_turn_be_taken_over"]
    assert "seen extended after its progress stopped" in hung, failing
    assert "condition f" in failing["test_the_receipt_recomputes_from_its_observations"], failing


@pytest.fixture
def leases(tmp_path):
    """A file holding one item's lease, written through a connection of the test's (a shop's,
    as a run's shops are: WAL, made before the watch starts), and a watch of it reading every
    10 ms; ``write(generation, expires)`` returns once the watch saw it (with
    ``seen_first=False``, at once)."""
    path = tmp_path / "shop.db"
    with closing(connect(path)) as db:
        db.execute(
            "CREATE TABLE assignment_leases"
            " (work_id INTEGER PRIMARY KEY, generation INTEGER, expires REAL)"
        )
        seen = watch.LeaseWatch(lambda: connect(path), every=0.01)
        seen.start()

        def write(generation: int, expires: float, seen_first: bool = True) -> None:
            db.execute(
                "INSERT INTO assignment_leases VALUES (1, ?, ?) ON CONFLICT (work_id)"
                " DO UPDATE SET generation = excluded.generation, expires = excluded.expires",
                (generation, expires),
            )
            if not seen_first:
                return
            wait_until(
                lambda: seen.seen.get(1, [[0.0, 0, 0.0]])[-1][1:] == [generation, expires],
                timeout=10,
                what=f"the watch to see generation {generation} end at {expires}",
            )

        try:
            yield seen, write
        finally:
            seen.end()


def test_the_watch_sees_the_lease_not_the_rows(leases):
    seen, write = leases
    write(1, 100.0)  # the claim
    write(1, 101.0)  # a renewal
    write(2, 130.0)  # a replacement's claim
    write(2, 131.0)  # a renewal that got past the fence
    watched = seen.stop()[1]
    assert [change[1:] for change in watched] == [[1, 100.0], [1, 101.0], [2, 130.0], [2, 131.0]]
    assert extensions(watched, 1, 100.0) == 1
    assert extensions(watched, 1, 100.0, after=watched[1][0]) == 0, "none after the renewal"
    assert stale_extensions(watched, 1) == 1
    recorded = {"watched": watched, "renewals": [{"generation": 1, "expires": 105.0}]}
    assert ends_unrecorded(recorded, 1, 100.0) == 1, "the rows say 105, the lease was 101"


def test_a_watch_past_its_bound_is_refused_not_kept(leases, monkeypatch):
    seen, write = leases
    monkeypatch.setattr(watch, "MAX_CHANGES", 1)
    write(1, 100.0)
    write(1, 101.0, seen_first=False)  # its last read, when it is stopped, finds this
    with pytest.raises(RuntimeError, match="changed more than 1 times"):
        seen.stop()
