"""What breaks without the chapter's claim and fence, shown in real processes on a fresh clone.

13b teaches a claim in one transaction and a fence inside every write. Before a learner has
written either, these two demonstrations show what each one prevents, with two real worker
processes on one SQLite file and no learner code at all:

- ``race``: a claim that reads in one statement and writes in another. Both workers read the
  same pending row before either writes (a file barrier makes the interleaving certain rather
  than lucky), so both take the work, both at generation 1. The same claim inside one
  ``BEGIN IMMEDIATE`` transaction: the second worker waits for the lock, then finds nothing.
- ``stale_write``: a holder at generation 1 is slow; its lease is taken over at generation 2;
  then it writes its transcript row. Without a check, the row lands; with the holder check in
  the same transaction as the insert, it is refused and absent.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from lucyshop.lab.lesson.inline import wrap

SCHEMA = (
    (
        "CREATE TABLE work (work_id INTEGER PRIMARY KEY, state TEXT NOT NULL,"
        " owner TEXT, generation INTEGER NOT NULL DEFAULT 0)"
    ),
    (
        "CREATE TABLE transcript (seq INTEGER PRIMARY KEY, work_id INTEGER, generation INTEGER,"
        " message TEXT)"
    ),
    "INSERT INTO work (work_id, state) VALUES (1, 'pending')",
)

CLAIM = r"""
import json, os, sqlite3, sys, time
path, name, mode, barrier = sys.argv[1:5]
db = sqlite3.connect(path, timeout=10, isolation_level=None)
pick = "SELECT work_id, generation FROM work WHERE state = 'pending' ORDER BY work_id LIMIT 1"
take = "UPDATE work SET state = 'running', owner = ?, generation = ? WHERE work_id = ?"
if mode == "naive":
    row = db.execute(pick).fetchone()              # read ...
    open(os.path.join(barrier, name), "w").close()
    deadline = time.monotonic() + 10
    while len(os.listdir(barrier)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)                           # ... both have read ...
    if row:
        db.execute(take, (name, row[1] + 1, row[0]))   # ... then both write
else:
    db.execute("BEGIN IMMEDIATE")                  # the write lock first, then read and write
    row = db.execute(pick).fetchone()
    time.sleep(0.3)                                # the other worker waits for the lock
    if row:
        db.execute(take, (name, row[1] + 1, row[0]))
    db.execute("COMMIT")
print(json.dumps(None if row is None else [row[0], row[1] + 1]))
"""

WRITE = r"""
import json, sqlite3, sys, time
path, generation, mode, go = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
db = sqlite3.connect(path, timeout=10, isolation_level=None)
deadline = time.monotonic() + 10
while not __import__("os").path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.01)                               # slow: it wakes after the takeover
db.execute("BEGIN IMMEDIATE")
now = db.execute("SELECT generation FROM work WHERE work_id = 1").fetchone()[0]
if mode == "fenced" and now != generation:
    db.execute("ROLLBACK")
    print(json.dumps(f"refused: generation {generation} is superseded by {now}"))
else:
    db.execute("INSERT INTO transcript (work_id, generation, message) VALUES (1, ?, ?)",
               (generation, "placing the order"))
    db.execute("COMMIT")
    print(json.dumps("written"))
"""


def _shop(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        for statement in SCHEMA:
            db.execute(statement)


def _start(*argv: str) -> subprocess.Popen:
    command = [sys.executable, "-c", *argv]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(process: subprocess.Popen) -> object:
    out, err = process.communicate(timeout=30)
    if process.returncode != 0:
        raise RuntimeError(err.strip().splitlines()[-1] if err.strip() else "a worker failed")
    return json.loads(out)


def race(directory: Path) -> dict[str, dict[str, object]]:
    """Two worker processes claim the one pending item at once, first with a read-then-write
    claim, then with the claim in one ``BEGIN IMMEDIATE`` transaction. What each one got,
    as ``[work_id, generation]`` or None, by mode and worker."""
    found: dict[str, dict[str, object]] = {}
    for mode in ("naive", "immediate"):
        shop = Path(directory) / f"{mode}.db"
        _shop(shop)
        barrier = Path(directory) / f"{mode}-barrier"
        barrier.mkdir(parents=True, exist_ok=True)
        workers = {name: _start(CLAIM, str(shop), name, mode, str(barrier)) for name in ("A", "B")}
        found[mode] = {name: _result(p) for name, p in workers.items()}
    return found


def stale_write(directory: Path) -> dict[str, object]:
    """A slow holder at generation 1 writes a transcript row after a takeover at generation 2,
    in a process of its own: without a check, and with the holder check in the insert's
    transaction. What it was told, and the rows by generation afterwards, by mode."""
    found: dict[str, object] = {}
    for mode in ("unfenced", "fenced"):
        shop = Path(directory) / f"{mode}.db"
        _shop(shop)
        with sqlite3.connect(shop) as db:
            db.execute("UPDATE work SET state = 'running', owner = 'old', generation = 1")
        go = Path(directory) / f"{mode}-go"
        go.unlink(missing_ok=True)
        old = _start(WRITE, str(shop), "1", mode, str(go))
        with sqlite3.connect(shop) as db:  # the lease ran out: a replacement takes over
            db.execute("UPDATE work SET owner = 'new', generation = 2")
        go.touch()  # the old holder wakes up
        told = _result(old)
        with sqlite3.connect(shop) as db:
            rows = db.execute("SELECT generation FROM transcript").fetchall()
        found[mode] = {"told": told, "rows by generation": [row[0] for row in rows]}
    return found


def show_race(directory: Path) -> None:
    """One line per claim: what the two workers got (which of them won a lock is the
    scheduler's choice, so the line does not name them)."""
    for mode, got in race(directory).items():
        how = "read, then write" if mode == "naive" else "one BEGIN IMMEDIATE transaction"
        said = sorted(
            "nothing" if g is None else f"work {g[0]} at generation {g[1]}" for g in got.values()
        )
        print(wrap(f"{how}: the two workers got {said[0]} and {said[1]}"))


def show_stale_write(directory: Path) -> None:
    for mode, result in stale_write(directory).items():
        print(
            wrap(
                f"{mode} observe: the generation-1 holder was told {result['told']!r};"
                f" transcript rows by generation: {result['rows by generation']}"
            )
        )
