"""Hostile students against the rival between a holder check and its write (issue 47): the
runs must be ones the writer can neither tell apart nor steer, and every write it makes after
the takeover is seen.

Each is a real ``make check`` of the reference with one hostile file appended:

- ``hostile/tell_runs_apart.py``: ``finish`` writes in one transaction on anything that is
  not a ``sqlite3.Connection`` and in two on a real one; ``observe`` writes the first call for
  a claim as one statement and every later one in two transactions;
- ``hostile/undo_write.py``: both write in a second transaction, look again, and take the
  write back if the work was taken over meanwhile.

Both once passed every row. ``observe`` and ``finish`` must be FAILING, each for what it did,
and every other row PASSING.
"""

from __future__ import annotations

import pytest
from hostile_checks import MARKS, hand_in, hostile, leftovers, reference, run_check, short_tmpdir

from lucyshop.lab.check.subjects import FUNCTIONS

pytestmark = MARKS

FAST = ("--no-measured", "--test-timeout=30", "--no-checkpoint")
CAUGHT = {
    "tell_runs_apart": {
        "observe": "must not act on which run",
        "finish": "stale holder still wrote",
    },
    "undo_write": dict.fromkeys(("observe", "finish"), "counted even if undone"),
}


@pytest.mark.parametrize("name", CAUGHT)
def test_a_writer_that_slips_past_the_rival_fails_its_row(tmp_path, name):
    with short_tmpdir() as tmpdir:
        path = hand_in(tmp_path / "student", reference() + hostile(name))
        checked = run_check(path, tmpdir, *FAST)
        left = leftovers(checked.marker, str(tmpdir))
    assert checked.status == 1, checked.output[-3000:]
    caught = CAUGHT[name]
    expected = {function: "FAILING" if function in caught else "PASSING" for function in FUNCTIONS}
    assert checked.functions() == expected, checked.functions()
    for function, said in caught.items():
        messages = [failure["message"] for failure in checked.rows()[function]["failures"]]
        assert any(said in message for message in messages), (function, messages)
    assert left == [], left
