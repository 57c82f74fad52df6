"""Hostile students against the wire between the sandbox and the trusted side (issue 38).

A frame from the worker is data to vet: it must come whole by the call's one deadline, it
may hold only so many values, and it must answer the request that was asked. The hostile file
(``hostile/wire.py``) writes on the worker's own socket: a reply that drips a byte a second,
a frame of 63 MB of empty lists, and a second reply left for the next call. ``make check`` must
name the function that hung and fail it fast from then on, keep its trusted processes under
1 GB, never hand one call's leftover bytes to another, and end within its deadlines.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hostile_checks import MARKS, Checked, hand_in, hostile, leftovers, short_tmpdir, with_bodies

pytestmark = MARKS

TEST_SECONDS = 10
FAST = ("--no-measured", f"--test-timeout={TEST_SECONDS}", "--no-checkpoint")
PEAK_BYTES = 1 << 30  # the trusted side's peak while a hostile file runs
# The run's own start-up, its suites and one hung test, with room for a loaded machine;
# a deadline per recv instead of per message spends the test deadline on each of nine tests.
CHECK_SECONDS = 150

# Runs one make check run in a process of its own, so that its peak memory (the largest process
# among everything it started and waited for, the sandboxes included) is that run's alone.
_MEASURED = """
import json, resource, sys
from pathlib import Path
sys.path[:0] = sys.argv[1:3]
from hostile_checks import run_check
done = run_check(Path(sys.argv[3]), Path(sys.argv[4]), *sys.argv[5:])
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"peak": peak, **vars(done)}))
"""


def measured_check(path: Path, tmpdir: Path, *args: str) -> tuple[Checked, int]:
    """``run_check`` of ``path`` and the peak resident bytes of any process it ran."""
    here = Path(__file__).resolve().parent
    argv = [sys.executable, "-c", _MEASURED, str(here), str(here.parent), str(path), str(tmpdir)]
    done = subprocess.run(
        argv + list(args), check=False, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return Checked(**{k: v for k, v in found.items() if k != "peak"}), found["peak"]


def test_a_worker_that_writes_its_own_frames_is_bounded(tmp_path):
    with short_tmpdir() as tmpdir:
        text = with_bodies("raise _NotYet()") + hostile("wire", megabytes=63)
        checked, peak = measured_check(hand_in(tmp_path, text), tmpdir, *FAST)
        left = leftovers(checked.marker, str(tmpdir))
    rows = checked.rows()
    assert checked.status == 1, checked.output[-3000:]
    dripping = [failure["message"] for failure in rows["percentile"]["failures"]]
    assert f"timed out after {TEST_SECONDS} s in percentile()" in dripping[0], dripping
    assert any("hung or ended the process in an earlier test" in m for m in dripping), dripping
    huge = rows["detection_delay"]["failures"][0]["message"]
    assert "value limit" in huge, huge
    assert peak < PEAK_BYTES, f"the run's processes peaked at {peak >> 20} MiB"
    assert "LEFTOVER" not in checked.everything(), "a call read another call's reply"
    late = [failure["message"] for failure in rows["fenced"]["failures"]]
    assert any("wrote after fenced() was answered" in m for m in late), late
    assert checked.seconds < CHECK_SECONDS, f"the run took {checked.seconds:.0f} s"
    assert left == [], left
