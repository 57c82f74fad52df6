"""What comes from the sandbox is data to vet, never a fact: a type, a path, a measurement.

Each test is one real hostile file run through ``make check`` as a student's is:

- ``hostile/claimed_stub.py``: every function is written and raises a ``NotStarted`` (the
  kit's own, or a look-alike whose module and name claim to be it). NOT STARTED comes from
  the file's syntax alone: every row and the checkpoint are FAILING.
- ``hostile/named_paths.py``: the answers of exercises 2, 5 and 6 name ``/dev/zero``, FIFOs,
  links out of their scratch and a database outside it as their receipt, shop and ledger.
  Each that is read is refused in one line naming the function (exercise 5's and 6's are
  never read: they are graded from the trusted side's own runs), at once (no test times
  out), nothing of the outside database reaches the feedback, and no process of the run
  grows past 1 GB.
- ``hostile/forge_measured.py``: exercise 6 measures nothing; it writes the committed receipt
  (edited to read as a quick scripted run) and forges the shop and the ledger it describes,
  and its records message only satisfies the unit test's order. Exercise 6 is graded from
  what the trusted side measured itself: FAILING, on the records its message never gave.
- ``hostile/forge_renewal.py``: exercise 5 measures nothing; it writes the committed receipt
  (edited likewise) and forges the three shops it describes, and its renewer renews only at
  the unit tests' pace. Exercise 5 is graded from what the trusted side measured itself:
  FAILING, on the renewals its renewer never made.
"""

from __future__ import annotations

import sqlite3
import uuid
from contextlib import closing

from hostile_checks import (
    MARKS,
    hand_in,
    hostile,
    leftovers,
    reference,
    run_check,
    short_tmpdir,
    with_bodies,
    with_stubs,
)
from sandbox_files import ROOT

from lucyshop.lab.checkpoint.judge import CASES
from lucyshop.lab.model.backend import GRADED

pytestmark = MARKS

FAST = ("--test-timeout=15", "--case-timeout=30", "--checkpoint-timeout=240")
PEAK_KIB = 1024 * 1024  # 1 GiB: what the trusted side may grow to, whatever a file names
COMMITTED_5 = ROOT / "evidence" / "ch13-exercise5-renewal-receipt.json"
# exercise 5's tests of renew and keep_renewing alone, on injected time or a thread
UNIT_TESTS_5 = ("test_renew_", "test_keep_renewing_", "test_a_bounded_renewal_", "test_progress_")
COMMITTED_6 = ROOT / "evidence" / "ch13-exercise6-records-receipt.json"


def test_a_claimed_not_started_is_failing(tmp_path):
    """No function is a stub by its syntax; each raises a NotStarted for itself, the kit's or
    a look-alike. Every stub's row FAILING, the checkpoint FAILING, exit 1 (never 3)."""
    with short_tmpdir() as tmpdir:
        text = with_bodies("raise _claimed()") + hostile("claimed_stub")
        checked = run_check(hand_in(tmp_path, text), tmpdir, "--no-measured", *FAST)
        left = leftovers(checked.marker, str(tmpdir))
    assert checked.status == 1, checked.output[-3000:]
    assert checked.functions() == with_stubs("FAILING"), checked.functions()
    said = [failure["message"] for failure in checked.rows()["claim"]["failures"]]
    assert any("NotStarted" in m or "not started" in m for m in said), said
    checkpoint = checked.data["checkpoint"]
    assert checkpoint["status"] == "FAILING", checkpoint
    assert not any(case["passed"] for case in checkpoint["cases"]), checkpoint
    assert len(checkpoint["cases"]) == len(CASES)
    assert left == [], left


def outside_database(path, secret: str) -> None:
    """A database no sandbox can see, shaped as a shop and a supplier's ledger, holding
    ``secret`` in every row a test would print."""
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(
            "CREATE TABLE orders (operation TEXT, status TEXT, amount_cents INTEGER,"
            " order_number INTEGER, body TEXT)"
        )
        db.execute("INSERT INTO orders VALUES (?, 'ACCEPTED', 450, 1, ?)", (secret, secret))
        db.execute("CREATE TABLE assistant_orders (operation TEXT, status TEXT, amount_cents INT)")
        db.execute("INSERT INTO assistant_orders VALUES (?, 'UNKNOWN', 450)", (secret,))


def test_paths_named_by_answers_are_refused_at_once(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = f"secret-{uuid.uuid4().hex}"
    outside_database(outside / "shop.db", secret)
    answers = tmp_path / "answers.py"
    answers.write_text(
        with_bodies("return _answer()", "exercises.py")
        + hostile("named_paths", outside=str(outside / "shop.db"), secret=secret),
        encoding="utf-8",
    )
    chapter = hand_in(tmp_path / "hand-in", with_bodies("return None"), exercises=answers)
    with short_tmpdir() as tmpdir:
        checked = run_check(chapter, tmpdir, "--no-checkpoint", *FAST, measure=True)
        left = leftovers(checked.marker, str(tmpdir))
    assert checked.status == 1, checked.output[-3000:]
    rows = checked.rows()
    for label, function, refused in (
        ("exercise 2", "exercise_2_cancel_while_delayed", 1),  # its ledger
        ("exercise 5", "exercise_5_renewal", 0),  # graded from the trusted side's own run
        ("exercise 6", "exercise_6_records", 0),  # likewise
    ):
        row = rows[label]
        messages = [failure["message"] for failure in row["failures"]]
        assert row["status"] == "FAILING", row
        said = [m for m in messages if m.startswith(f"{function}() named its ") and "refused" in m]
        assert len(said) >= refused, messages
        assert not [m for m in messages if "timed out" in m], messages
    assert secret not in checked.everything()
    assert checked.peak_kib is not None and checked.peak_kib < PEAK_KIB, checked.peak_kib
    assert left == [], left


def failing_tests(tmp_path, answers, label: str) -> dict[str, str]:
    """Check the reference's chapter functions with ``answers`` as the exercise book, no
    checkpoint: row ``label`` must be FAILING and nothing the check started may be left; its
    failing tests' messages by test name."""
    chapter = hand_in(tmp_path / "hand-in", reference(), exercises=answers)
    with short_tmpdir() as tmpdir:
        checked = run_check(chapter, tmpdir, "--no-checkpoint", *FAST)
        left = leftovers(checked.marker, str(tmpdir))
    row = checked.rows()[label]
    assert row["status"] == "FAILING", row
    assert left == [], left
    return {failure["test"].split("::")[-1]: failure["message"] for failure in row["failures"]}


def test_a_forged_measurement_earns_nothing(tmp_path):
    """The reference's chapter functions, and answers whose exercise 6 is forged."""
    answers = tmp_path / "answers.py"
    receipt = COMMITTED_6.read_text(encoding="utf-8")
    answers.write_text(
        with_bodies("return _forged()", "exercises.py")
        + hostile("forge_measured", receipt=receipt, backend=GRADED),
        encoding="utf-8",
    )
    failing = failing_tests(tmp_path, answers, "exercise 6")
    # the trusted side's own records: its message gave the replacement none of them
    assert "Continue the task." in failing["test_the_records_given_are_the_shops_own"], failing
    assert "condition f" in failing["test_the_receipt_recomputes_from_its_observations"], failing


def test_a_forged_renewal_earns_nothing(tmp_path):
    """The reference's chapter functions, and answers whose exercise 5 is forged: every unit
    test of ``renew`` and ``keep_renewing`` passes, and the measured ones fail."""
    answers = tmp_path / "answers.py"
    receipt = COMMITTED_5.read_text(encoding="utf-8")
    answers.write_text(
        with_bodies("return _forged()", "exercises.py")
        + hostile("forge_renewal", receipt=receipt, backend=GRADED),
        encoding="utf-8",
    )
    failing = failing_tests(tmp_path, answers, "exercise 5")
    assert not [name for name in failing if name.startswith(UNIT_TESTS_5)], failing
    # the trusted side's own run: no arm renewed, and the hung turn was taken over at once
    assert "renewed" in failing["test_the_plain_arm_never_renews_and_the_renewing_arms_do"]
    hung = failing["test_a_hung_turn_with_an_unbounded_renewer_keeps_its_lease"]
    assert "no replacement took it over" in hung, failing
    assert "condition f" in failing["test_the_receipt_recomputes_from_its_observations"], failing
