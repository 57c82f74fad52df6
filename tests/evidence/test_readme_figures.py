"""The README's measured figures are the receipts' own.

The README states what ``make test-time``, ``make bench`` and ``make autograder-proof``
measured, in sentences a person reads. Each figure here is written from its receipt the way
the README words it, and must be found there (whitespace and line breaks aside): a receipt
re-measured without its sentence, or a figure typed by hand, fails this test and names the
sentence to write.
"""

from __future__ import annotations

import json
import os
import re
from functools import cache
from pathlib import Path

import pytest

from lucyshop.lab.evidence import testtime

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "evidence"


@cache
def receipt(name: str) -> dict:
    return json.loads((EVIDENCE / name).read_text(encoding="utf-8"))


def readme() -> str:
    """The README with every run of whitespace made one space, so a phrase may wrap."""
    return re.sub(r"\s+", " ", (ROOT / "README.md").read_text(encoding="utf-8"))


def timed_run(timed: dict) -> str:
    """One ``make test-time`` run: the quiet one dated, the one beside burners with its load."""
    passed = f"{timed['counts']['passed']:,} tests in {timed['pytest_seconds']:.0f} s"
    failed = timed["counts"]["failed"] + timed["counts"]["errors"]
    if failed:  # the README must say so, and name them
        passed += f" and failed {failed} ({', '.join(timed['failures'])})"
    if not timed["burners"]:
        return f"{passed} of pytest on {timed['provenance']['started_utc'][:10]}"
    load = timed["load_average_during"]
    return f"load average {load['mean']:.1f} on average, {load['max']:.1f} at most) passed {passed}"


def met(bench: dict, name_starts: str) -> str:
    """``met`` or ``missed``: what ``make bench`` found for its target named so."""
    (target,) = [t for t in bench["targets"] if t["name"].startswith(name_starts)]
    return "met" if target["held"] else "missed"


def bench_feedback(bench: dict) -> str:
    feedback = bench["feedback"]
    return (
        f"A warm `make check` of the solutions took {feedback['make_check_s']['median']:.1f} s "
        f"against its 15 s target ({met(bench, 'warm make check')}), one printed rerun "
        f"{feedback['rerun_s']['median']:.2f} s, and the sandbox {feedback['sandbox_ratio']:.2f}x"
    )


def bench_grading(bench: dict) -> str:
    grading = bench["grading"]
    minutes = grading["projected_seconds_for_200_cpu_bound"] / 60
    return (
        f"they took {grading['seconds']:.0f} s, {grading['cpu_seconds_per_student']:.1f} "
        f"CPU-seconds a student, so a class of 200 takes about {minutes:.0f} minutes with every "
        "core busy"
    )


def bench_queues(bench: dict) -> str:
    """The committed bench run's queue figures and which of its targets it missed."""
    kit = [
        row
        for row in bench["queues"]["rows"]
        if row["engine"] == "kit" and row["cycle"] == "claim+finish"
    ]

    def rate(queued: int) -> float:
        (row,) = [
            r for r in kit if r["sync"] == "FULL" and r["processes"] == 1 and r["queued"] == queued
        ]
        return row["cycles_per_s"]["median"]

    versus = [row["vs_persist-queue"] for row in kit]
    doubled = max(r["duplicates"] for r in bench["queues"]["rows"] if r["engine"] != "kit")
    p99 = [row["take_p99_ms"]["median"] for row in kit if row["processes"] == 8]
    missed = [target["name"] for target in bench["targets"] if not target["held"]]
    provenance = bench["provenance"]
    return (
        f"The committed run ({provenance['started_utc'][:10]}, "
        f"{provenance['seconds'] / 60:.1f} minutes, {bench['options']['repeats']} repeats, load "
        f"{provenance['loadavg_end'][0]:.1f} at its end): claim+finish {rate(9900):,.0f}/s at "
        f"9,900 queued and {rate(300):,.0f}/s at 300 (FULL, 1 process); the kit's rate is "
        f"{min(versus):.2f}-{max(versus):.2f}x persist-queue's across the cells, and "
        f"persist-queue handed one item to two processes up to {doubled:,} times in a cell. p99 "
        f"claim latency at 8 processes: {min(p99):.0f}-{max(p99):.0f} ms. "
        f"{len(bench['targets']) - len(missed)} of {len(bench['targets'])} targets held; missed: "
        + "; ".join(missed)
    )


def gradescope(proof: dict) -> str:
    ran = proof["run"]
    mib = ran["peak_cgroup_bytes"] / 2**20
    graded = f"graded 100 of 100 in {ran['seconds']:.0f} s"
    if "--isolation" in proof["provenance"]["command"]:
        return f"also {graded} ({ran['cpu_seconds']:.0f} CPU-seconds, peak {mib:.0f} MiB)"
    return (
        f"Setup took {proof['setup']['seconds']:.0f} s with warm caches; the reference (all "
        f"three files) {graded} under half a core ({ran['cpu_seconds']:.0f} CPU-seconds), within "
        f"the 600 s timeout, with student code in bubblewrap. The cgroup's peak was {mib:.0f} MiB"
    ) + (
        f", page cache and the exercise-7 PostgreSQL server included, against 768 MiB: the limit"
        f" was never reached and nothing was OOM-killed. The summed resident size of its processes"
        f" ({ran['peak_processes']} at most) peaked at {ran['peak_tree_rss_bytes'] / 2**20:.0f} MiB"
        if not ran["limit_hits"] and not ran["oom_kills"]
        else ", and the limit was hit"
    )


FIGURES = {
    "make test, quiet": lambda: timed_run(receipt("test-time.json")["quiet"]),
    "make test, beside 8 burners": lambda: timed_run(receipt("test-time.json")["loaded"]),
    "warm make check": lambda: bench_feedback(receipt("bench.json")),
    "a class graded": lambda: bench_grading(receipt("bench.json")),
    "claims at scale": lambda: bench_queues(receipt("bench.json")),
    "Gradescope, bubblewrap": lambda: gradescope(receipt("gradescope-run.json")),
    "Gradescope, user mode": lambda: gradescope(receipt("gradescope-run-user.json")),
}


@pytest.mark.parametrize("figure", FIGURES)
def test_the_readme_states_the_receipts_figure(figure):
    if figure.startswith("make test") and os.environ.get(testtime.REWRITING):
        pytest.skip("make test-time is rewriting test-time.json in this very run")
    sentence = FIGURES[figure]()
    assert sentence in readme(), f"README.md should say, from the receipt: {sentence!r}"


def test_a_figure_that_is_not_the_receipts_is_caught():
    bench = receipt("bench.json")
    ratio = bench["feedback"]["sandbox_ratio"] + 0.01
    typed = {**bench, "feedback": {**bench["feedback"], "sandbox_ratio": ratio}}
    assert bench_feedback(bench) in readme()
    assert bench_feedback(typed) not in readme()
