"""Names in the gradebook: a hand-in's name and messages are data, shown and never run.

A real ``make grade`` of a class whose hand-ins are named as a hostile student would name them
(``hostile/names.py``): a spreadsheet formula, ``@`` and ``-`` at the start of a name,
terminal escapes; a hand-in that is a link to a classmate's folder, one that is a link to a
classmate's file, a folder whose chapter file is such a link, and a FIFO named like a hand-in.
Every line printed and every file name must be free of control characters, no CSV cell may
start like a formula (``grades.csv`` and ``canvas.csv``), and each link or special file is
refused in one line, graded 0, with nothing read through it.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import uuid

import pytest
from hostile_checks import MARKS, hand_in, hostile, leftovers, short_tmpdir, with_bodies
from sandbox_files import ROOT

pytestmark = MARKS

FORMULA = '=HYPERLINK("http:evil.example","alice")'
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[32mmallory"
CHECKED = {FORMULA: "dir", "@SUM(1+1)": "py", "-2+3": "py", ESCAPES: "dir"}
REFUSED = ("linked", "linked-file", "inner", "fifo")
STARTS = ("=", "+", "-", "@")


def number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    hand_ins = tmp_path_factory.mktemp("class")
    out = tmp_path_factory.mktemp("grades") / "out"
    token = f"alice-{uuid.uuid4().hex}"
    text = with_bodies("raise _named()") + hostile("names", message=f"{FORMULA} {ESCAPES}")
    alice = hand_in(hand_ins / "alice", text + f"\n# {token}\n")
    for name, kind in CHECKED.items():
        if kind == "dir":
            hand_in(hand_ins / name, text).with_name("exercises.py").unlink()
        else:
            (hand_ins / f"{name}.py").write_text(text, encoding="utf-8")
    alice.with_name("exercises.py").unlink()
    os.symlink(alice.parent, hand_ins / "linked")
    os.symlink(alice, hand_ins / "linked-file.py")
    (hand_ins / "inner").mkdir()
    os.symlink(alice, hand_ins / "inner" / "ch13_leases.py")
    os.mkfifo(hand_ins / "fifo.py")
    roster = tmp_path_factory.mktemp("roster") / "roster.csv"
    with roster.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["folder", "name", "id", "email", "section"])
        writer.writerow(["alice", "Alice", "1001", "alice@uni.example", "A"])
        writer.writerow([FORMULA, "=cmd|' /C calc'!A0", "+1002", "@evil", "-A"])
    with short_tmpdir() as tmpdir:
        argv = [sys.executable, "-m", "lucyshop.lab.grade", str(hand_ins), "--out", str(out)]
        argv += ["--no-checkpoint", "--jobs", "2", "--no-progress", "--roster", str(roster)]
        done = subprocess.run(
            argv,
            cwd=ROOT,
            env=os.environ | {"TMPDIR": str(tmpdir)},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        left = leftovers(None, str(tmpdir), str(hand_ins))
    return {"done": done, "out": out, "left": left, "token": token}


def sheet(path):
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def test_the_grader_finishes_and_leaves_nothing_running(graded):
    done = graded["done"]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert graded["left"] == [], graded["left"]


def test_no_printed_line_and_no_file_name_carries_a_control_character(graded):
    done = graded["done"]
    printed = done.stdout + done.stderr
    assert not any(c in printed for c in "\x1b\x07"), printed[-3000:]
    assert "\\x1b]0;owned\\x07" in done.stdout, done.stdout
    names = [path.name for path in graded["out"].rglob("*")]
    assert not [name for name in names if any(ord(c) < 32 or c == "\x7f" for c in name)], names
    for path in graded["out"].rglob("*.txt"):
        assert "\x1b" not in path.read_text(encoding="utf-8"), path


@pytest.mark.parametrize("book", ["grades.csv", "canvas.csv"])
def test_no_cell_starts_like_a_formula(graded, book):
    rows = sheet(graded["out"] / book)
    live = [c for row in rows for c in row if c.startswith(STARTS) and not number(c)]
    assert live == [], live
    shown = [c for row in rows for c in row]
    assert "'" + (FORMULA if book == "grades.csv" else "=cmd|' /C calc'!A0") in shown, rows


def test_each_link_and_special_file_is_refused_in_one_line(graded):
    done = graded["done"]
    refusals = [line for line in done.stderr.splitlines() if "refused: " in line]
    assert len(refusals) == len(REFUSED), done.stderr
    for name in REFUSED:
        assert sum(f"make grade: {name}: refused: " in line for line in refusals) == 1, refusals
    rows = {row[0]: row for row in sheet(graded["out"] / "grades.csv")[1:]}
    header = sheet(graded["out"] / "grades.csv")[0]
    for name in REFUSED:
        row = dict(zip(header, rows[name], strict=True))
        assert row["score"] == "0" and row["message"].startswith("refused: "), row


def test_nothing_of_the_classmate_was_read_through_a_link(graded):
    """A link graded as a hand-in would be the classmate's file under another name: the
    similarity report would pair it with her, and its row would be graded, not refused."""
    named = {name for row in sheet(graded["out"] / "similarity.csv")[1:] for name in row}
    assert not named & {"linked", "linked-file", "inner"}, named
    rows = {row[0]: row for row in sheet(graded["out"] / "grades.csv")[1:]}
    assert [rows[name][3] for name in REFUSED] == ["NO FILE"] * len(REFUSED), rows
