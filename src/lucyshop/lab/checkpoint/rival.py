"""A rival who takes the work over between any two statements of a writer, at moments the
trusted side picks, in runs the writer cannot tell apart.

Each run gives the writer (``observe`` or ``finish``) a connection to a fresh copy of the shop
that only the trusted side can open (``lucyshop.lab.sandbox.served.ServedShop``): every statement
is ours to execute. Before every statement of every run the rival tries the write lock, on a
connection of its own and without waiting, and lets it go again; from statement ``first`` on
it also takes the work over once it has the lock (a transaction that holds the lock keeps it
out; finished work it leaves alone). So until the rival strikes, a run looks the same from
the sandbox whatever its ``first``. There is one run for each ``first`` from 1 to ``BOUND``
and one run with no rival at all, in an order drawn here, the rival-free one anywhere among
them: the writer cannot learn from its calls which is which, nor how many statements we
counted.

Each copy records, in tables the sandbox may neither read nor write (``RUNS``, ``WRITES``):
which work and generation it tests, where the rival was loose and where it struck, the
statements the writer sent, whether it was refused, and, from triggers of ours on every table
of the shop, each write with the lease's generation at that moment. A write after the takeover
is in that log even if the writer deleted its row again before it returned. ``problems_in``
reads what happened from the files alone: the learner tests and the checkpoint call it on
the copies as they run, and the checkpoint's judge calls it again on the copies kept.

A run fails when anything was written to the shop after the takeover; when the rival got in
and the writer neither wrote before it nor was refused; when the writer sent, before the
rival struck, other statements than in the rival-free run (it told the runs apart); when the
rival-free run did not write one row of its own, was refused, or took more than ``BOUND``
statements; and when the rival never got in at all (nothing was tested). Raw SQL, not the
student's ``claim``: this is about the writer.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lucyshop.lab.sandbox.served import TRUSTED_TABLES, ServedShop

RUNS = f"{TRUSTED_TABLES}rival"
WRITES = f"{TRUSTED_TABLES}writes"
QUIET = f"{TRUSTED_TABLES}quiet"  # holds a row only inside the rival's own transaction
WRITERS = {"observe": "transcript", "finish": "outcomes"}  # the table each writer writes
BOUND = 16  # the statements of one call the rival is loosed before; a writer needs about 7
OPERATIONS = ("INSERT", "UPDATE", "DELETE")
NUMBER = re.compile(r"\d+(?:\.\d*)?(?:e[-+]?\d+)?", re.IGNORECASE)


class RivalWrong(AssertionError):
    """What a run shows the writer did wrong, or that the rival could not test it."""


@dataclass
class RivalRun:
    """One call on a served copy of the shop, the rival loose from statement ``first``."""

    path: Path
    first: int | None  # None: no rival
    refused: PermissionError | None = None


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

    def run(self, call: Callable[[Any], Any], first: int | None, number: int) -> RivalRun:
        """``call(connection)`` on a fresh copy (``run-NN.db``, ``number`` its place among
        the runs), the rival loose from statement ``first`` (None: never)."""
        run = RivalRun(self.home / f"run-{number:02d}.db", first)
        self._copy(run)
        rival = sqlite3.connect(run.path, isolation_level=None, timeout=0)
        rival.execute("PRAGMA synchronous = OFF")  # a throwaway copy: no waiting on the disk
        struck = False

        def before(number: int, sql: str) -> None:
            nonlocal struck
            if not struck:
                struck = self._try(rival, number, sql, first is not None and number >= first)

        server = ServedShop(run.path, before)
        try:
            call(self.probes.connection(server))
        except PermissionError as error:
            run.refused = error
        finally:
            sent = list(server.statements)
            server.close()
            rival.execute(
                f"UPDATE {RUNS} SET statements = ?, refused = ?",
                (json.dumps(sent), None if run.refused is None else str(run.refused)[:300]),
            )
            rival.close()
        return run

    def _copy(self, run: RivalRun) -> None:
        """The pristine shop at ``run.path``, with our record of the run and our triggers."""
        with (
            contextlib.closing(sqlite3.connect(self.pristine)) as source,
            contextlib.closing(sqlite3.connect(run.path, isolation_level=None)) as copy,
        ):
            source.backup(copy)
            copy.execute("PRAGMA journal_mode = DELETE")  # one file, kept and read whole
            tables = [
                name
                for (name,) in copy.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                if not name.startswith(("sqlite_", TRUSTED_TABLES))
            ]
            copy.execute("BEGIN")
            copy.execute(
                f"CREATE TABLE {RUNS}(work_id, generation, tbl, first, took, took_sql,"
                " statements, refused)"
            )
            copy.execute(
                f"INSERT INTO {RUNS}(work_id, generation, tbl, first) VALUES (?, ?, ?, ?)",
                (self.held.work_id, self.held.generation, self.table, run.first),
            )
            copy.execute(f"CREATE TABLE {WRITES}(seq INTEGER PRIMARY KEY, tbl, op, generation)")
            copy.execute(f"CREATE TABLE {QUIET}(rival)")
            for table in tables:
                for operation in OPERATIONS:
                    copy.execute(_log_trigger(table, operation))
            copy.execute("COMMIT")

    def _try(self, rival: sqlite3.Connection, number: int, sql: str, strike: bool) -> bool:
        """Try the write lock now, never waiting, and let it go again, unless ``strike`` and
        the work is not finished yet: then take it over in that transaction. True once the
        work is taken over."""
        try:
            rival.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # the writer's transaction holds the lock: no gap
            return False
        work_id = self.held.work_id
        (state,) = rival.execute("SELECT state FROM work WHERE work_id = ?", (work_id,)).fetchone()
        if not strike or state == "finished":  # finished work is nobody's to take over
            rival.execute("ROLLBACK")
            return False
        try:
            rival.execute(f"INSERT INTO {QUIET} VALUES (1)")  # our own writes are not logged
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
            rival.execute(f"UPDATE {RUNS} SET took = ?, took_sql = ?", (number, sql[:120]))
            rival.execute(f"DELETE FROM {QUIET}")
            rival.execute("COMMIT")
        except sqlite3.OperationalError:  # a reader's lock kept our commit out: no gap yet
            rival.execute("ROLLBACK")
            return False
        return True

    def attempt(self, call: Callable[[Any], Any], what: str) -> list[RivalRun]:
        """Every run of ``call``, vetted (``RivalWrong`` at the first thing wrong, see the
        module's docstring)."""
        order: list[int | None] = list(range(1, BOUND + 1))
        draw = random.SystemRandom()
        draw.shuffle(order)
        order.insert(draw.randrange(len(order) + 1), None)
        runs = [self.run(call, first, number) for number, first in enumerate(order)]
        problems = problems_in([run.path for run in runs], what)
        if problems:
            raise RivalWrong(problems[0])
        return runs


def _log_trigger(table: str, operation: str) -> str:
    """A trigger of ours that logs each ``operation`` on ``table`` with the held lease's
    generation at that moment (before the row changes), but not the rival's own."""
    return (
        f'CREATE TRIGGER "{TRUSTED_TABLES}log_{table}_{operation.lower()}"'
        f' BEFORE {operation} ON "{table}" WHEN NOT EXISTS (SELECT 1 FROM {QUIET})'
        f" BEGIN INSERT INTO {WRITES}(tbl, op, generation) VALUES ('{table}', '{operation}',"
        f" (SELECT l.generation FROM assignment_leases l JOIN {RUNS} r"
        f" ON l.work_id = r.work_id)); END"
    )


def written(db: sqlite3.Connection, table: str, work_id: int) -> list[list]:
    """The rows of ``table`` for ``work_id``, in order, as JSON-ready lists."""
    found = db.execute(f"SELECT * FROM {table} WHERE work_id = ? ORDER BY rowid", (work_id,))
    return [list(row) for row in found]


@dataclass(frozen=True)
class Record:
    """What one copy says happened in its run."""

    name: str
    generation: int
    table: str
    first: int | None
    took: int | None
    took_sql: str | None
    statements: list[str]
    refused: str | None
    rows: int  # the held work's rows in the writer's table at the end
    writes: list[tuple[str, str, int]]  # (table, operation, generation then), in order


def read(path: Path) -> Record:
    """The record a copy keeps of its run (ValueError when it keeps none that makes sense)."""
    with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
        found = db.execute(
            "SELECT work_id, generation, tbl, first, took, took_sql, statements, refused"
            f" FROM {RUNS}"
        ).fetchall()
        if len(found) != 1 or found[0][2] not in WRITERS.values():
            raise ValueError(f"{path.name}: the rival's record is not one row")
        work_id, generation, table, first, took, took_sql, statements, refused = found[0]
        sent = json.loads(statements) if isinstance(statements, str) else None
        if not isinstance(sent, list):
            raise ValueError(f"{path.name}: the run never ended")
        writes = db.execute(f"SELECT tbl, op, generation FROM {WRITES} ORDER BY seq").fetchall()
        rows = len(written(db, table, work_id))
    return Record(path.name, generation, table, first, took, took_sql, sent, refused, rows, writes)


def problems_in(paths: list[Path], what: str) -> list[str]:
    """What the copies at ``paths`` (one run without a rival, one per moment, any order)
    show went wrong, from the files alone; empty when the writer held up everywhere."""
    try:
        records = [read(path) for path in paths]
    except (ValueError, sqlite3.Error) as error:
        return [str(error)]
    calm = [record for record in records if record.first is None]
    if len(calm) != 1 or len(records) != BOUND + 1:
        return [f"the runs kept are not one without a rival and {BOUND} with one"]
    (quiet,) = calm
    problems = []
    if quiet.refused is not None:
        problems.append(
            f"nothing came between the holder check and {what}, yet it was refused: {quiet.refused}"
        )
    if quiet.rows != 1:
        problems.append(
            f"nothing came between the holder check and {what}, yet it wrote {quiet.rows} rows"
            f" for generation {quiet.generation}, not one"
        )
    if len(quiet.statements) > BOUND:
        problems.append(
            f"{what} took {len(quiet.statements)} statements; the rival is tried before the"
            f" first {BOUND} only, so a writer may take no more"
        )
    for record in records:
        problems += _run_problems(record, quiet, what)
    if not any(record.took is not None for record in records):
        problems.append(
            f"the rival never got in, before any statement of {what}: nothing was tested"
        )
    return problems


def _shape(sql: str) -> str:
    """A statement with its numbers left out: a time written into the SQL text differs from
    run to run in any writer."""
    return NUMBER.sub("0", sql)


def _run_problems(record: Record, quiet: Record, what: str) -> list[str]:
    """What one run shows went wrong, beside the run without a rival."""
    problems = []
    sent = [_shape(sql) for sql in record.statements]
    calm = [_shape(sql) for sql in quiet.statements]
    seen = sent if record.took is None else sent[: record.took]
    if seen != calm[: len(seen)] or (record.took is None and len(seen) != len(calm)):
        where = next(
            (i for i, pair in enumerate(zip(seen, calm)) if pair[0] != pair[1]),
            min(len(seen), len(calm)),
        )
        problems.append(
            f"{what} must not act on which run it is in: before anything told them apart it"
            f" sent other statements in one run than in another (from statement {where + 1}:"
            f" {len(seen)}, against {len(quiet.statements)} without a rival)"
        )
    if record.took is None:
        return problems
    held = record.generation
    after = [(table, op) for table, op, generation in record.writes if generation != held]
    if after:
        table, op = after[0]
        problems.append(
            f"the stale holder still wrote, counted even if undone: a rival took the work over"
            f" after the holder check and before {what} (a second transaction), before"
            f" statement {record.took} ({record.took_sql[:40]}), and {len(after)} writes"
            f" followed ({op} on {table} first)"
        )
    wrote = any(
        (table, op, generation) == (record.table, "INSERT", held)
        for table, op, generation in record.writes
    )
    if not wrote and record.refused is None:
        problems.append(
            f"{what} neither wrote before a rival took the work over nor was refused (the"
            f" rival came before statement {record.took}: {record.took_sql[:40]})"
        )
    return problems
