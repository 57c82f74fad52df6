"""A hostile student against ``make grade``'s similarity (issue 47): the reference handed in as
data, a zlib and base64 blob it ``exec``s behind wrappers of its own
(``hostile/hidden_reference.py``). It scored 0.01 and was not flagged, while a plain copy
scored 1.00. In a real ``make grade`` it must score as a copy, be flagged, and the gradebook
and the printed line must say it hides code.
"""

from __future__ import annotations

import base64
import csv
import os
import subprocess
import sys
import zlib

from hostile_checks import MARKS, hand_in, hostile, leftovers, reference, short_tmpdir
from sandbox_files import ROOT

from lucyshop.lab.grade import rubric

pytestmark = MARKS


def test_a_reference_hidden_as_data_is_flagged_by_make_grade(tmp_path):
    hand_ins, out = tmp_path / "class", tmp_path / "out"
    blob = base64.b64encode(zlib.compress(reference().encode("utf-8"))).decode("ascii")
    text = hostile("hidden_reference", blob=blob)
    hand_in(hand_ins / "hider", text).with_name("exercises.py").unlink()
    with short_tmpdir() as tmpdir:
        argv = [sys.executable, "-m", "lucyshop.lab.grade", str(hand_ins), "--out", str(out)]
        done = subprocess.run(
            [*argv, "--no-checkpoint", "--jobs", "1", "--no-progress"],
            cwd=ROOT,
            env=os.environ | {"TMPDIR": str(tmpdir)},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        left = leftovers(None, str(tmpdir), str(hand_ins))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with (out / "grades.csv").open(encoding="utf-8-sig", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert float(row["similarity"]) >= rubric.load().flag_at, row
    assert row["flagged"].startswith("yes;") and "exec (line" in row["flagged"], row
    assert "FLAGGED: it hides code as data" in done.stdout, done.stdout
    assert left == [], left
