"""A rival who takes the work over between any two statements of a writer, at moments the
trusted side picks: the sandbox neither chooses them nor sees them coming.

Each run gives the writer (``observe`` or ``finish``) a connection to a copy of the shop that
only the trusted side can open (``lucyshop.lab.sandbox.served.Server``): every statement is
ours to execute, and before statement ``first`` and each one after, until it gets in, the
rival tries to take the work over on a connection of its own, without waiting (a transaction
that holds the write lock keeps it out). One calm run counts the writer's statements; then
one run for each of them as ``first``, in an order drawn here. A holder check in the write's
own transaction keeps every try out or comes after it; a holder check in a transaction of its
own lets the rival in before the write, and a row written after the takeover is stale.

Each copy records, in a table the sandbox may neither read nor write (``RUNS``), which work
and generation it tests, where the rival was let loose, and, in the takeover's own
transaction, the rows written by then. So ``problems_in`` reads what happened from the file alone:
the learner tests and the checkpoint call it on the copies as they run, and the checkpoint's
judge calls it again on the copies kept. A writer the rival never got in front of at all
fails: nothing was tested. Raw SQL, not the student's ``claim``: this is about the writer.
"""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lucyshop.lab.sandbox.served import TRUSTED_TABLES, Server

RUNS = f"{TRUSTED_TABLES}rival"
WRITERS = {"observe": "transcript", "finish": "outcomes"}  # the table each writer writes
CALM = "calm"


class RivalWrong(AssertionError):
    """What a run shows the writer did wrong, or that the rival could not test it."""


@dataclass
class Run:
    """One call on a served copy of the shop, the rival loose from statement ``first``."""

    path: Path
    first: int | None  # None: the calm run, no rival
    refused: PermissionError | None = None
    statements: int = 0


class RivalAtEveryMoment:
    """The rival against ``held``'s writes to ``table``, on copies of ``source`` in ``home``
    (a directory of the trusted side's own, out of the sandbox's view)."""

    def __init__(
        self, probes: Any, source: sqlite3.Connection, held: Any, table: str, home: Path
    ) -> None:
        """``probes``: the worker's ``lucyshop.lab.sandbox.inside.shop_probes``."""
        self.probes, self.held, self.table, self.home = probes, held, table, home
        self.pristine = home / "pristine.db"
        with contextlib.closing(sqlite3.connect(self.pristine)) as copy:
            source.backup(copy)

    def run(self, call: Callable[[Any], Any], first: int | None) -> Run:
        """``call(connection)`` on a fresh copy, the rival loose from statement ``first``."""
        run = Run(self.home / f"run-{first or CALM}.db", first)
        with (
            contextlib.closing(sqlite3.connect(self.pristine)) as source,
            contextlib.closing(sqlite3.connect(run.path)) as copy,
        ):
            source.backup(copy)
            copy.execute("PRAGMA journal_mode = DELETE")  # one file, kept and read whole
            copy.execute(
                f"CREATE TABLE {RUNS}(work_id, generation, tbl, first, took, took_sql, rows)"
            )
            copy.execute(
                f"INSERT INTO {RUNS}(work_id, generation, tbl, first) VALUES (?, ?, ?, ?)",
                (self.held.work_id, self.held.generation, self.table, first),
            )
            copy.commit()
        taken = False

        def before(number: int, sql: str) -> None:
            nonlocal taken
            if first is not None and number >= first and not taken:
                taken = self._take_over(run.path, number, sql)

        server = Server(run.path, before)
        try:
            call(self.probes.connection(server))
        except PermissionError as error:
            run.refused = error
        finally:
            run.statements = len(server.statements)
            server.close()
        return run

    def _take_over(self, path: Path, number: int, sql: str) -> bool:
        """Take the work over now, never waiting, recording the rows written by then in the
        same transaction; False if the writer's transaction kept the rival out."""
        rival = sqlite3.connect(path, isolation_level=None, timeout=0)
        try:
            rival.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # the writer's transaction holds the lock: no gap
            rival.close()
            return False
        work_id = self.held.work_id
        try:
            (generation,) = rival.execute(
                "SELECT generation FROM assignment_leases WHERE work_id = ?", (work_id,)
            ).fetchone()
            holder = f"rival#{generation + 1}"
            rival.execute(
                "UPDATE assignment_leases SET worker_id = ?, generation = ?, expires = ?"
                " WHERE work_id = ?",
                (holder, generation + 1, self.held.expires + 100, work_id),
            )
            rival.execute("UPDATE work SET worker_id = ? WHERE work_id = ?", (holder, work_id))
            rival.execute(
                f"UPDATE {RUNS} SET took = ?, took_sql = ?, rows = ?",
                (number, sql[:120], json.dumps(written(rival, self.table, work_id))),
            )
            rival.execute("COMMIT")
        except sqlite3.OperationalError:  # a reader's lock kept our commit out: no gap yet
            rival.execute("ROLLBACK")
            return False
        finally:
            rival.close()
        return True

    def attempt(self, call: Callable[[Any], Any], what: str) -> list[Run]:
        """Every run of ``call``, vetted (``RivalWrong`` at the first wrong one): the calm one
        writes the holder's row; wherever the rival got in, no row is written after it and
        the writer wrote first or was refused; and the rival got in somewhere."""
        calm = self.run(call, None)
        if calm.refused is not None:
            raise RivalWrong(
                f"nothing came between the holder check and {what}, yet it was refused:"
                f" {calm.refused}"
            )
        moments = list(range(1, calm.statements + 1))
        random.SystemRandom().shuffle(moments)
        runs = [calm, *(self.run(call, first) for first in moments)]
        problems = problems_in([run.path for run in runs], what)
        if problems:
            raise RivalWrong(problems[0])
        return runs


def written(db: sqlite3.Connection, table: str, work_id: int) -> list[list]:
    """The rows of ``table`` for ``work_id``, in order, as JSON-ready lists."""
    found = db.execute(f"SELECT * FROM {table} WHERE work_id = ? ORDER BY rowid", (work_id,))
    return [list(row) for row in found]


def problems_in(paths: list[Path], what: str) -> list[str]:
    """What the copies at ``paths`` (a calm run first, then one per moment) show went wrong,
    from the files alone; empty when the writer held up and the rival got in somewhere."""
    problems, took = [], 0
    for path in paths:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
            record = db.execute(
                f"SELECT work_id, generation, tbl, first, took, took_sql, rows FROM {RUNS}"
            ).fetchall()
            if len(record) != 1:
                return [f"{path.name}: the rival's record is not one row"]
            work_id, generation, table, first, number, sql, before = record[0]
            rows = written(db, table, work_id)
        if first is None and len(rows) != 1:  # the copy held no row of this work before
            problems.append(
                f"nothing came between the holder check and {what}, yet it wrote {len(rows)} rows"
                f" for generation {generation}, not one"
            )
        if number is None:
            continue
        took += 1
        stale = [row for row in rows if row not in json.loads(before)]
        if stale:
            problems.append(
                f"a rival took the work over before statement {number} ({sql}), after the"
                f" holder check and before {what} (a second transaction): the stale"
                f" generation-{generation} row was written anyway"
            )
    if not took:
        problems.append(
            f"the rival never got in, before any statement of {what}: nothing was tested"
        )
    return problems
