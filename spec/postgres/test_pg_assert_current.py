"""``assert_current(connection, held)``: four conditions, the last on the server's clock, under a
row lock that keeps a takeover out until the guarded write commits; it returns the lease's
expiry, as chapter 13's does."""

from __future__ import annotations

import time

import pytest
from pg_support import expire, lease

from lucyshop.lab.given import pg_shop
from lucyshop.lab.sandbox.postgres.box import transaction


def test_the_current_holder_passes_and_gets_the_leases_expiry(pg, worker, conn, held):
    with transaction(worker, conn):
        assert pg.assert_current(conn, held) == held.expires == lease(conn, held.work_id)["expires"]


@pytest.mark.parametrize(
    "change, why",
    [
        ("UPDATE work SET state = 'finished'", "the work is finished"),
        ("UPDATE leases SET owner = 'rival'", "another owner holds the lease"),
        ("UPDATE leases SET generation = generation + 1", "the generation moved on"),
        ("UPDATE leases SET expires = clock_timestamp() - interval '1 second'", "it expired"),
    ],
)
def test_each_check_refuses_on_its_own(pg, worker, conn, held, change, why):
    conn.execute(change)
    with pytest.raises(PermissionError), transaction(worker, conn):
        pg.assert_current(conn, held)
    assert why


def test_unknown_work_is_refused(pg, worker, conn, held):
    ghost = pg_shop.PgClaim(held.work_id + 99, "s1", "t", "till", 1, held.expires)
    with pytest.raises(PermissionError), transaction(worker, conn):
        pg.assert_current(conn, ghost)


def test_a_worker_clock_ahead_does_not_expire_a_live_lease(shifted, held):
    ahead = shifted(+600)
    with transaction(ahead.worker, ahead.conn):
        assert ahead.pg.assert_current(ahead.conn, held) == held.expires, "30 s are left"


def test_a_worker_clock_behind_does_not_keep_an_expired_lease(shifted, conn, held):
    expire(conn, held.work_id)
    behind = shifted(-600)
    with pytest.raises(PermissionError), transaction(behind.worker, behind.conn):
        behind.pg.assert_current(behind.conn, held)


TTL = 2.0


def test_no_takeover_between_the_check_and_the_write(pg, pg_box, worker, role, conn, add_work):
    """The lease runs out while the guarded transaction is open: a claim must not take the
    work until that transaction ends, or the write would land after a takeover."""
    work_id = add_work()
    short = pg.claim(conn, "till", ttl=TTL)  # long enough for the holder check on a loaded machine
    rival = pg_box.connect(role)  # a second connection of the worker's
    try:
        worker.execute(rival, "SET lock_timeout = '3s'")  # a claim that waits for it fails
        with transaction(worker, conn):
            pg.assert_current(conn, short)
            time.sleep(TTL + 0.3)  # the lease expires by the server's clock inside it
            during = pg.claim(rival, "rival", ttl=30)
        after = pg.claim(rival, "rival", ttl=30)
    finally:
        worker.close(rival)
    assert during is None, f"a claim took work {work_id} while its holder check was open"
    assert (after.work_id, after.generation) == (work_id, 2), after
