"""A hostile classmate in ``make grade``: the gradebook and the other students are out of reach.

A class of two: alice hands in the reference (with a line of her own), mallory a file whose
functions do nothing and which, from every sandbox it runs in, tries to read and overwrite
alice's hand-in (the class directory and every staged copy it can find), to kill alice's
run, and leaves a daemon that keeps rewriting every result file it can guess and the
class's gradebook with a full score for her, for two minutes (``hostile/mallory.py``).
Alice's score and hand-in must be untouched, mallory's score her own, and the gradebook, once
the grader has exited, must stay as the grader wrote it.

The class is graded twice: in the sandbox this machine offers, and as root in a container
whose seccomp refuses namespaces (``tests/refuse_namespaces.py``), where each hand-in runs as
a uid of its own from the pool (``uids.UID_FIRST``): there, too, nothing of the class may
outlive ``make grade``, neither a process of a pool uid nor a file one left in a shared
temporary place.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import stat
import subprocess
import sys
import time
import uuid

import psutil
import pytest
from hostile_checks import (
    MARKS,
    hand_in,
    hostile,
    leftovers,
    reference,
    short_tmpdir,
    with_bodies,
)
from sandbox_files import ROOT, STUBBED

from lucyshop.lab.check.subjects import FUNCTIONS
from lucyshop.lab.grade import rubric
from lucyshop.lab.grade.submissions import slug
from lucyshop.lab.grade.verdict import Verdict
from lucyshop.lab.sandbox import jail
from lucyshop.lab.sandbox.host import uids
from lucyshop.lab.statuses import VerdictStatus

pytestmark = MARKS

QUIET = 3.0  # seconds the gradebook is watched after the grader exits
REFUSE = ROOT / "tests" / "refuse_namespaces.py"
MODES = [
    "this machine's sandbox",
    pytest.param(
        "user mode",
        marks=pytest.mark.skipif(
            os.geteuid() != 0 or jail.isolation() != "bwrap",
            reason="user mode is root's; made here by refusing bubblewrap its namespaces",
        ),
    ),
]


def snapshot(out):
    return {
        str(path.relative_to(out)): path.read_bytes()
        for path in sorted(out.rglob("*"))
        if path.is_file()
    }


def pool_leftovers() -> list[str]:
    """Processes of the pool's uids that no run holds now (another test's run may be going on
    under a held one), and what they left in the shared temporary places. The pool is
    root's: for anyone else, nothing."""
    if not uids.UID_LOCKS.is_dir() or os.geteuid() != 0:
        return []
    free = set()
    for slot in range(uids.UID_SLOTS):
        with open(uids.UID_LOCKS / f"{slot}.lock", "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            free.add(uids.UID_FIRST + slot)
    found = [
        f"process {p.pid} of uid {p.info['uids'].real}"
        for p in psutil.process_iter(["uids"])
        if p.info["uids"] and p.info["uids"].real in free
    ]
    for place in uids.LEFT_IN:
        for entry in place.iterdir():
            try:
                if entry.lstat().st_uid in free:
                    found.append(f"{entry} of uid {entry.lstat().st_uid}")
            except OSError:
                continue
    return found


@pytest.fixture(scope="module", params=MODES)
def graded(request, tmp_path_factory):
    hand_ins = tmp_path_factory.mktemp("class")
    out = tmp_path_factory.mktemp("grades") / "out"
    token = f"alice-{uuid.uuid4().hex}"
    alice = hand_in(hand_ins / "alice", reference() + f"\n# {token}: alice's own work\n")
    alice.with_name("exercises.py").unlink()  # neither hands in exercises: none of them runs
    handed_in = alice.read_bytes()
    decoy = out.parent / "rubric.toml"  # what a linked result file once overwrote
    decoy.write_text("[functions]\npoints = 60\n")
    with short_tmpdir() as tmpdir:
        params = {
            "victims": [str(alice)],
            "class_dir": str(hand_ins),
            "tmp": str(tmpdir),
            "out": str(out),
            "words": [slug("alice"), str(alice), str(tmpdir)],
            "decoy": str(decoy),
        }
        text = with_bodies("raise _Mallory()") + hostile("mallory", **params)
        hand_in(hand_ins / "mallory", text).with_name("exercises.py").unlink()
        argv = [sys.executable, "-m", "lucyshop.lab.grade", str(hand_ins), "--out", str(out)]
        env = os.environ | {"TMPDIR": str(tmpdir)}
        if request.param == "user mode":
            argv = [sys.executable, str(REFUSE), *argv]
            # A uid handed down (one this process holds): the class's hand-ins run side by
            # side, and each must take a uid of its own, never share the one it was handed.
            env[uids.UID_ENV] = str(uids.hold_uid())
        argv += ["--no-checkpoint", "--jobs", "2", "--no-progress"]
        started = time.monotonic()
        done = subprocess.run(
            argv,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        seconds = time.monotonic() - started
        first = snapshot(out)
        time.sleep(QUIET)
        left = leftovers(None, str(tmpdir), str(hand_ins)) + pool_leftovers()
    with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        book = {row["student"]: row for row in csv.DictReader(handle)}
    kept = {
        name: json.loads((out / "results" / f"{slug(name)}.json").read_text(encoding="utf-8"))
        for name in ("alice", "mallory")
    }
    return {
        "mode": request.param,
        "done": done,
        "seconds": seconds,
        "book": book,
        "kept": kept,
        "first": first,
        "later": snapshot(out),
        "left": left,
        "out": out,
        "alice": (alice, handed_in, token),
        "decoy": decoy.read_text(),
    }


def rows_of(graded, name):
    return {row["label"]: row for row in graded["kept"][name]["verdict"]["rows"]}


def test_the_grader_finishes_and_leaves_nothing_running(graded):
    done = graded["done"]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert graded["left"] == [], graded["left"]
    if graded["mode"] == "user mode":
        feedback = graded["first"]["feedback/alice.txt"].decode()
        assert "an unprivileged uid of its own (user mode" in feedback, feedback[:2000]
    assert stat.S_IMODE(graded["out"].stat().st_mode) == 0o700


def test_the_victims_hand_in_and_score_are_untouched(graded):
    alice, handed_in, _token = graded["alice"]
    assert alice.read_bytes() == handed_in
    row = graded["book"]["alice"]
    assert row["status"] == VerdictStatus.CHECKED, row
    assert float(row["score"]) == rubric.load().functions.points, row
    statuses = {label: r["status"] for label, r in rows_of(graded, "alice").items()}
    assert {f: statuses[f] for f in FUNCTIONS} == dict.fromkeys(FUNCTIONS, "PASSING"), statuses


def test_the_attacker_read_overwrote_and_killed_nothing(graded):
    _alice, _handed_in, token = graded["alice"]
    message = rows_of(graded, "mallory")["percentile"]["message"]
    assert "'read': 0, 'overwritten': 0, 'killed': 0" in message, message
    mallory = [path for path in graded["first"] if "mallory" in path]
    assert mallory, sorted(graded["first"])
    assert not any(token.encode() in graded["first"][path] for path in mallory), mallory


def test_the_attackers_escapes_are_shown_never_sent(graded):
    done = graded["done"]
    assert "\x1b" not in done.stdout + done.stderr
    feedback = graded["first"]["feedback/mallory.txt"].decode()
    assert "\x1b" not in feedback and "\\x1b[32mmallory" in feedback, feedback[-2000:]


def test_the_attacker_earns_only_her_own_score(graded):
    statuses = {label: r["status"] for label, r in rows_of(graded, "mallory").items()}
    assert not any(statuses[f] == "PASSING" for f in STUBBED), statuses
    row = graded["book"]["mallory"]
    verdict = Verdict.from_dict(graded["kept"]["mallory"]["verdict"])
    assert row["status"] == VerdictStatus.CHECKED, row
    assert float(row["score"]) == rubric.score(verdict, rubric.load()).points, row


def test_the_gradebook_stays_as_the_grader_wrote_it(graded):
    assert graded["later"] == graded["first"]
    assert graded["decoy"] == "[functions]\npoints = 60\n"
    marks = (b"mallory,CHECKED,100", b"mallory: 100/100", b"checkpoint PASSING")
    forged = [path for path, data in graded["first"].items() if any(m in data for m in marks)]
    assert forged == []
