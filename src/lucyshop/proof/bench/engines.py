"""The queues the bench drives, each behind one small interface: fill a file, open it at a
synchronous setting, run one cycle (take one item and complete it).

``Kit`` is the chapter's protocol (``claim`` then ``finish``, optionally ``observe`` between);
the peers are litequeue (``pop`` + ``done``) and persist-queue's ``SQLiteAckQueue`` (``get`` +
``ack``), installed by the ``bench`` extra. The peers do strictly less per cycle: no session
rule, no lease row with a generation, no holder check before the completing write.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

from lucyshop.lab.loader import load_impl
from lucyshop.store import BUSY_TIMEOUT_MS

SYNCS = ("FULL", "NORMAL")
BUSY_S = BUSY_TIMEOUT_MS / 1000  # every engine waits as long for a lock


class Kit:
    """The chapter's claim cycle, through the implementation at ``impl``."""

    def __init__(self, impl: Path, *, observe: bool, owner: str = "bench") -> None:
        self.leases = load_impl(impl)
        self.observe = observe
        self.owner = owner
        self.db: sqlite3.Connection | None = None

    def fill(self, path: Path, items: int) -> None:
        """Queue ``items`` pending assignments in one transaction (admission is not measured)."""
        db, _queue = self.leases.open_worker_shop(path)
        with db.immediate():
            db.executemany(
                "INSERT INTO work(source_id, session_id, text, created) VALUES (?, ?, ?, ?)",
                [
                    (f"bench-{n}", f"session-{n}", "one short turn", time.time())
                    for n in range(items)
                ],
            )
        checkpoint_and_close(db)

    def open(self, path: Path, sync: str) -> Kit:
        self.db, _queue = self.leases.open_worker_shop(path)
        self.db.execute(f"PRAGMA synchronous = {sync}")
        return self

    def cycle(self) -> tuple[int, float] | None:
        start = time.perf_counter()
        held = self.leases.claim(self.db, self.owner, ttl=600)
        took = time.perf_counter() - start
        if held is None:
            return None
        if self.observe:
            self.leases.observe(self.db, held, {"role": "assistant", "text": "ok"})
        self.leases.finish(self.db, held, "DONE", "ok")
        return held.work_id, took

    def close(self) -> None:
        if self.db is not None:
            self.db.close()


class LiteQueuePeer:
    """litequeue: ``pop`` (an IMMEDIATE transaction) then ``done``."""

    def __init__(self) -> None:
        import litequeue  # the bench extra

        self.module = litequeue
        self.queue = None

    def fill(self, path: Path, items: int) -> None:
        queue = self.module.LiteQueue(str(path), timeout=BUSY_S)
        with queue.transaction():
            for n in range(items):
                queue.put(str(n))
        checkpoint_and_close(queue.conn)

    def open(self, path: Path, sync: str) -> LiteQueuePeer:
        self.queue = self.module.LiteQueue(str(path), timeout=BUSY_S)
        self.queue.conn.execute(f"PRAGMA synchronous = {sync}")
        return self

    def cycle(self) -> tuple[int, float] | None:
        start = time.perf_counter()
        message = self.queue.pop()
        took = time.perf_counter() - start
        if message is None:
            return None
        self.queue.done(message.message_id)
        return int(message.data), took

    def close(self) -> None:
        if self.queue is not None:
            self.queue.conn.close()


class PersistQueuePeer:
    """persist-queue's ``SQLiteAckQueue``: ``get`` then ``ack``, one connection per process."""

    def __init__(self) -> None:
        import persistqueue  # the bench extra

        self.module = persistqueue
        self.queue = None

    def _queue(self, path: Path):
        return self.module.SQLiteAckQueue(
            str(path.parent), db_file_name=path.name, timeout=BUSY_S, auto_resume=False
        )

    def fill(self, path: Path, items: int) -> None:
        queue = self._queue(path)
        queue._putter.execute("PRAGMA synchronous = OFF")  # a fast fill; each cycle sets its own
        for n in range(items):
            queue.put(n)
        checkpoint_and_close(queue._putter)

    def open(self, path: Path, sync: str) -> PersistQueuePeer:
        self.queue = self._queue(path)
        self.queue._putter.execute(f"PRAGMA synchronous = {sync}")  # the one connection it uses
        return self

    def cycle(self) -> tuple[int, float] | None:
        start = time.perf_counter()
        try:
            item = self.queue.get(block=False, raw=True)
        except self.module.Empty:
            return None
        took = time.perf_counter() - start
        self.queue.ack(id=item["pqid"])
        return int(item["data"]), took

    def close(self) -> None:
        if self.queue is not None:
            self.queue.close()


# (engine, cycle) -> how to build it in a process; the kit needs the implementation's path.
WORKLOADS = {
    ("kit", "claim+finish"): lambda impl: Kit(impl, observe=False),
    ("kit", "claim+observe+finish"): lambda impl: Kit(impl, observe=True),
    ("litequeue", "pop+done"): lambda impl: LiteQueuePeer(),
    ("persist-queue", "get+ack"): lambda impl: PersistQueuePeer(),
}


def peers_installed() -> bool:
    try:
        import litequeue  # noqa: F401
        import persistqueue  # noqa: F401
    except ImportError:
        return False
    return True


def checkpoint_and_close(db: sqlite3.Connection) -> None:
    """Fold the WAL into the main file and close, so copying that one file copies the queue."""
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def copy_queue(template: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(template, target)
