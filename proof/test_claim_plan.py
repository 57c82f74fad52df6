"""The reference ``claim`` walks an index to the oldest eligible item: its plan sorts nothing.

Beyond the book: the chapter's claim query sorts the open work; the reference names the partial
index ``work_open`` (``LEASE_MIGRATIONS`` version 2) with ``INDEXED BY``. The learner suite
measures what this means (a claim near the queue's capacity costs about what it costs on a
small shop); this reads the plan SQLite chose for every statement the reference's ``claim``
ran, with and without the planner's statistics.
"""

from __future__ import annotations

import pytest

from lucyshop.lab.loader import impl_path, load_impl


@pytest.fixture
def reference():
    return load_impl(impl_path("solutions"))


def plans_of_a_claim(leases, db) -> dict[str, list[str]]:
    """Each SELECT that one ``claim`` executes, with its EXPLAIN QUERY PLAN details."""
    statements: list[str] = []
    db.set_trace_callback(statements.append)
    try:
        held = leases.claim(db, "planner", ttl=30, now=1_000.0)
    finally:
        db.set_trace_callback(None)
    assert held is not None, "the shop has pending work"
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    return {s: [r[3] for r in db.execute("EXPLAIN QUERY PLAN " + s)] for s in selects}


def test_the_open_work_index_is_the_second_lease_migration(reference, tmp_path):
    db, _queue = reference.open_worker_shop(tmp_path / "shop.db")
    try:
        indexes = {row[1] for row in db.execute("PRAGMA index_list(work)")}
        versions = db.execute("SELECT version FROM schema_versions WHERE line = 'leases'")
        assert ("work_open" in indexes, versions.fetchone()[0]) == (True, 2)
    finally:
        db.close()


@pytest.mark.parametrize("analyzed", [False, True], ids=["no-statistics", "analyzed"])
def test_the_claim_plan_uses_the_open_work_index_and_no_temp_b_tree(reference, tmp_path, analyzed):
    db, _queue = reference.open_worker_shop(tmp_path / "shop.db")
    try:
        with db.immediate() as connection:
            connection.executemany(
                "INSERT INTO work(source_id, session_id, text, created, state)"
                " VALUES (?, ?, ?, 0, ?)",
                [
                    (f"w{n}", f"s{n % 50}", "turn", "finished" if n < 500 else "pending")
                    for n in range(1_500)
                ],
            )
        if analyzed:
            db.execute("ANALYZE")
        plans = plans_of_a_claim(reference, db)
    finally:
        db.close()
    details = [detail for plan in plans.values() for detail in plan]
    assert plans, "claim runs at least one SELECT"
    assert not [d for d in details if "TEMP B-TREE" in d], f"a claim sorts: {plans}"
    assert any("USING INDEX work_open" in d for d in details), f"work_open is not walked: {plans}"
