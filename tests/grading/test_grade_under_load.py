"""The same hand-ins graded twice, once as the machine is and once beside a CPU burner that keeps
at least eight processes runnable on top of it: every score, row and checkpoint case the same.

A grade must not depend on how fast or how loaded the grading machine is (issue 29): exercises
5 and 6 run on the scripted stand-in, and every deadline inside a check is wide of what the
work takes. The hand-ins: the reference with its exercises and exercise 7's file (every row
runs, the checkpoint too) and a mutant that loses points in its function rows and in the
checkpoint. The burner's load is sampled while the loaded grading runs (processes running, as
psutil sees them), so the test fails if the load it claims was never there.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
from mutants import BY_NAME

from lucyshop.lab.grade import rubric, submissions
from lucyshop.lab.grade.classroom import grade_class
from lucyshop.lab.loader import ROOT

BURNERS = 8
SPIN = "while True:\n    pass\n"


def hand_ins(directory: Path) -> list[submissions.Submission]:
    reference = directory / "reference"
    reference.mkdir(parents=True)
    for name in ("ch13_leases.py", "exercises.py", "ch13_postgres.py"):
        (reference / name).write_bytes((ROOT / "solutions" / name).read_bytes())
    mutant = directory / "mutant"
    mutant.mkdir()
    (mutant / "ch13_leases.py").write_text(BY_NAME["observe_fence"].source(), encoding="utf-8")
    (mutant / "exercises.py").write_bytes((ROOT / "solutions" / "exercises.py").read_bytes())
    return submissions.find(directory)


def outcome(graded) -> dict:
    """Everything a grade is made of, per student."""
    return {
        item.submission.student: {
            "status": item.verdict.status,
            "score": item.score,
            "rows": [(r.label, r.status, r.passed, r.total) for r in item.verdict.rows],
            "checkpoint": item.verdict.checkpoint,
            "cases": [(c.case, c.passed) for c in item.verdict.cases],
        }
        for item in graded
    }


def runnable() -> int:
    """Processes running on the machine now, as psutil sees them."""
    running = 0
    for proc in psutil.process_iter(["status"]):
        running += proc.info["status"] == psutil.STATUS_RUNNING
    return running


class Burner:
    """``BURNERS`` processes that spin at normal priority, and the runnable count sampled."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.samples: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.stop.wait(0.5):
            self.samples.append(runnable())

    def __enter__(self) -> Burner:
        self.procs = [
            subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL)
            for _ in range(BURNERS)
        ]
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop.set()
        self.thread.join(5)
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait(10)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_same_hand_ins_get_the_same_grades_beside_a_cpu_burner(tmp_path):
    found = hand_ins(tmp_path / "class")
    loaded = rubric.load()
    quiet = outcome(grade_class(found, tmp_path / "quiet", loaded, jobs=2, progress=False))
    with Burner() as burner:
        busy = outcome(grade_class(found, tmp_path / "busy", loaded, jobs=2, progress=False))
    assert burner.samples, "the load was never sampled"
    typical = sorted(burner.samples)[len(burner.samples) // 2]
    assert typical >= BURNERS, f"runnable processes while grading: {burner.samples}"
    assert quiet["reference"]["score"] == loaded.total, quiet["reference"]
    assert 0 < quiet["mutant"]["score"] < loaded.total, quiet["mutant"]
    assert quiet["mutant"]["checkpoint"] == "FAILED", quiet["mutant"]
    assert busy == quiet
