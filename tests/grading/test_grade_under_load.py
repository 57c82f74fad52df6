"""Hand-ins graded at the lowest priority beside a CPU burner that keeps at least eight processes
runnable on top of it get the grades they get on a quiet machine: every score, row and
checkpoint case the same.

A grade must not depend on how fast or how loaded the grading machine is (issue 29): exercises
5 and 6 run on the scripted stand-in, and every deadline inside a check is wide of what the
work takes. The hand-ins: the reference with its exercises and exercise 7's file (every row
runs, the checkpoint too), whose grade is all of it, loaded or not, and a mutant chapter file
that loses points in its function rows and in the checkpoint, graded once quiet to compare.
The burner's load is sampled while the loaded grading runs (processes running, as psutil sees
them), so the test fails if the load it claims was never there.

The loaded grading and the burner both run at niceness 19: the grading's checks share with eight
spinning processes whatever CPU the rest of the machine leaves, and the rest of the test suite,
beside it in ``make test``, is not slowed by a burner it does not test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
from mutants import BY_NAME

from lucyshop.lab.grade import rubric
from lucyshop.lab.loader import ROOT
from lucyshop.proof import testtime

BURNERS = 8
LOWEST = 19  # the niceness of the loaded grading and of the burner
GRADE = Path(__file__).with_name("graded_outcome.py")
GRADE_SECONDS = 1500
REFERENCE_FILES = ("ch13_leases.py", "exercises.py", "ch13_postgres.py")


def hand_ins(directory: Path, *students: str) -> Path:
    """A class of ``students``: the reference (its exercises and exercise 7's file too), the
    mutant (its chapter file alone: its exercise rows would be the reference's)."""
    files = {
        "reference": {name: (ROOT / "solutions" / name).read_text() for name in REFERENCE_FILES},
        "mutant": {"ch13_leases.py": BY_NAME["observe_fence"].source()},
    }
    for student in students:
        (directory / student).mkdir(parents=True)
        for name, text in files[student].items():
            (directory / student / name).write_text(text, encoding="utf-8")
    return directory


def graded(hand_ins: Path, out: Path, nice: int) -> dict:
    """The class graded by a child at ``nice`` more niceness than this process: what its grades
    are made of, per student."""
    done = subprocess.run(
        [sys.executable, str(GRADE), str(hand_ins), str(out), "--nice", str(nice)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=GRADE_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["niceness"] == min(os.nice(0) + nice, LOWEST), report["niceness"]
    return report["outcome"]


def runnable() -> int:
    """Processes running on the machine now, as psutil sees them."""
    running = 0
    for proc in psutil.process_iter(["status"]):
        running += proc.info["status"] == psutil.STATUS_RUNNING
    return running


class Burner:
    """``BURNERS`` processes that spin at the lowest priority (``testtime.burners``), and the
    runnable count sampled."""

    def __init__(self) -> None:
        self.spinning = testtime.burners(BURNERS, nice=LOWEST)
        self.pids: list[int] = []
        self.samples: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.stop.wait(0.5):
            self.samples.append(runnable())

    def __enter__(self) -> Burner:
        self.pids = self.spinning.__enter__()
        self.thread.start()
        return self

    @property
    def niceness(self) -> list[int]:
        return [psutil.Process(pid).nice() for pid in self.pids]

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(5)
        self.spinning.__exit__(*exc)


@pytest.mark.slow
@pytest.mark.timeout(2 * GRADE_SECONDS + 60)
def test_the_same_hand_ins_get_the_same_grades_beside_a_cpu_burner(tmp_path):
    loaded = rubric.load()
    quiet = graded(hand_ins(tmp_path / "quiet-class", "mutant"), tmp_path / "quiet", 0)
    with Burner() as burner:
        busy_class = hand_ins(tmp_path / "busy-class", "reference", "mutant")
        busy = graded(busy_class, tmp_path / "busy", LOWEST)
        niceness = burner.niceness
    assert burner.samples, "the load was never sampled"
    typical = sorted(burner.samples)[len(burner.samples) // 2]
    assert typical >= BURNERS, f"runnable processes while grading: {burner.samples}"
    assert niceness == [LOWEST] * BURNERS, niceness
    reference = busy["reference"]  # all of it: every row, every test, every case
    assert reference["score"] == loaded.total, reference
    assert {(status, passed == total > 0) for _l, status, passed, total in reference["rows"]} == {
        ("PASSING", True)
    }, reference["rows"]
    assert reference["checkpoint"] == "PASSING", reference
    assert all(passed for _case, passed in reference["cases"]), reference
    assert 0 < quiet["mutant"]["score"] < loaded.total, quiet["mutant"]
    assert quiet["mutant"]["checkpoint"] == "FAILING", quiet["mutant"]
    assert busy["mutant"] == quiet["mutant"]
