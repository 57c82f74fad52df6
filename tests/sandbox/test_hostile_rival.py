"""A hostile student against the fault the trusted side injects (issue 38): the rival who takes
the work over between a holder check and its write must come at moments no sandboxed code
chooses.

The file is the reference with both of the kit's "holder check in its own transaction"
mutants applied (``tests/mutants.py``), and ``hostile/swapped_probe.py`` appended: at import
it rewrites, in the worker, whatever the trusted side could use there to time the rival. The
rows of ``observe`` and ``finish`` must be FAILING, each for the stale row written after a
takeover, and every other function's row PASSING; the run's processes under 1 GB and
within its deadlines.
"""

from __future__ import annotations

from hostile_checks import MARKS, hand_in, hostile, leftovers, short_tmpdir, split_writers
from test_hostile_wire import CHECK_SECONDS, PEAK_BYTES, measured_check

from lucyshop.lab.check.subjects import FUNCTIONS

pytestmark = MARKS

FAST = ("--no-measured", "--test-timeout=20", "--no-checkpoint")
CAUGHT = {"observe", "finish"}


def test_a_swapped_probe_does_not_hide_the_check_in_its_own_transaction(tmp_path):
    with short_tmpdir() as tmpdir:
        path = hand_in(tmp_path, split_writers() + hostile("swapped_probe"))
        checked, peak = measured_check(path, tmpdir, *FAST)
        left = leftovers(checked.marker, str(tmpdir))
    assert checked.status == 1, checked.output[-3000:]
    expected = {name: "FAILING" if name in CAUGHT else "PASSING" for name in FUNCTIONS}
    assert checked.functions() == expected, checked.functions()
    for name in CAUGHT:
        messages = [failure["message"] for failure in checked.rows()[name]["failures"]]
        assert any("stale" in message for message in messages), (name, messages)
    assert peak < PEAK_BYTES, f"the run's processes peaked at {peak >> 20} MiB"
    assert checked.seconds < CHECK_SECONDS, f"the run took {checked.seconds:.0f} s"
    assert left == [], left
