"""Scripted stale writes: a stale write the soak makes for certain, whatever the machine's speed.

Seeded chaos makes stale writers only when a pause happens to land in the middle of a turn and
another worker happens to take the work over before the paused one resumes. On a loaded
machine that may not happen in a short run. ``--stale BOUNDARY`` makes it happen by steps,
each waiting for an event, never for a time:

1. armed: the parent leaves a token, ``BOUNDARY.armed`` holding the arming's number, in the
   breaks directory (one boundary at a time, so that never more than one worker is stopped and
   another can always take its work over);
2. stopped: the first worker turn to reach that boundary takes the token and stops there,
   saying where (``BOUNDARY.ARMING.at``: its work id, generation and pid);
3. released: once the shop shows a newer generation of that work (its lease ran out and another
   worker claimed it), the parent says go (``BOUNDARY.ARMING.go``);
4. done: the worker has made its write, now stale for certain (``BOUNDARY.ARMING.done``); the
   log marks it ``scripted`` and the invariants require it refused.

A worker that dies before its write (a chaos kill) gives the token back: the step is armed again.
A worker still stopped when the run ends (the drain's stop file) goes on without a scripted write.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lucyshop.atomic import write_text
from lucyshop.proof.soak.shop import read_only

BOUNDARIES = ("transcript", "propose", "supplier", "completion")
STEPS = ("armed", "stopped", "released", "done")
FILES = {"stopped": "at", "released": "go", "done": "done"}  # BOUNDARY.ARMING.<file>
# The longest the chaos phase goes on past its seconds for the script to finish: only a harness
# that cannot make its stale write waits this long (then the soak fails, saying which step).
SCRIPT_SECONDS = 300.0
# A token taken but never answered with BOUNDARY.ARMING.at (its taker killed in between) is
# armed again after this long. Harmless if the taker was only slow: files are per arming, so a
# late taker waits for a go that never comes, and goes on unscripted when the run ends.
LOST_SECONDS = 5.0


@dataclass
class Stale:
    """One scripted stale write: where it is made, and how far it has got."""

    boundary: str
    step: str = "waiting"  # then the STEPS in turn
    arming: int = 0  # how many times it was armed: the step files of each are its own
    work_id: int | None = None
    generation: int | None = None
    pid: int | None = None
    superseded_by: int | None = None
    lost_since: float | None = None

    @property
    def rearmed(self) -> int:
        return max(0, self.arming - 1)


class Script:
    """The parent's side: arms each boundary once and moves each step on when its event is seen."""

    def __init__(self, directory: Path, shop: Path, boundaries: Iterable[str]) -> None:
        self.dir, self.shop = directory, shop
        self.dir.mkdir(parents=True, exist_ok=True)
        self.stales = [Stale(b) for b in dict.fromkeys(boundaries)]

    def token(self, stale: Stale) -> Path:
        return self.dir / f"{stale.boundary}.armed"

    def file(self, stale: Stale, step: str) -> Path:
        return self.dir / f"{stale.boundary}.{stale.arming}.{FILES[step]}"

    def arm_next(self) -> None:
        """Arm the first step still waiting, once none is under way."""
        if any(s.step in STEPS[:3] for s in self.stales):
            return
        for stale in self.stales:
            if stale.step == "waiting":
                self._arm(stale)
                return

    def _arm(self, stale: Stale) -> None:
        stale.arming += 1
        stale.step, stale.work_id, stale.generation, stale.pid = "armed", None, None, None
        stale.lost_since = None
        write_text(self.token(stale), f"{stale.arming}\n")

    @property
    def pending(self) -> bool:
        return any(stale.step != "done" for stale in self.stales)

    def holding(self) -> set[int]:
        """Pids of workers stopped by the script or making its write: chaos leaves them be."""
        return {s.pid for s in self.stales if s.step in ("stopped", "released") and s.pid}

    def follow(self, alive: set[int]) -> None:
        """Move every step whose event has happened; ``alive``: the workers' pids now running."""
        for stale in self.stales:
            if stale.step == "armed":
                self._taken(stale)
            if stale.step == "stopped":
                newer = self.generation_now(stale) or 0
                if newer > (stale.generation or 0):  # the lease ran out and another took it
                    stale.superseded_by, stale.step = newer, "released"
                    write_text(self.file(stale, "released"), "go\n")
            if stale.step == "released" and self.file(stale, "done").exists():
                stale.step = "done"
            if stale.step in ("stopped", "released") and stale.pid not in alive:
                self._arm(stale)  # it died before its write: let another turn take it
        self.arm_next()

    def _taken(self, stale: Stale) -> None:
        """Armed: has a worker taken the token and said where it stopped?"""
        if self.file(stale, "stopped").exists():
            where = json.loads(self.file(stale, "stopped").read_text())
            stale.work_id, stale.generation = where["work_id"], where["gen"]
            stale.pid, stale.step = where["pid"], "stopped"
        elif self.token(stale).exists():
            stale.lost_since = None
        elif stale.lost_since is None:
            stale.lost_since = time.monotonic()
        elif time.monotonic() - stale.lost_since > LOST_SECONDS:
            self._arm(stale)

    def generation_now(self, stale: Stale) -> int | None:
        with closing(read_only(self.shop)) as db:
            row = db.execute(
                "SELECT generation FROM assignment_leases WHERE work_id = ?", (stale.work_id,)
            ).fetchone()
        return None if row is None else row[0]

    def problems(self) -> list[str]:
        """A step that never finished is the harness's failure (the first invariant says so)."""
        return [
            f"the scripted stale {s.boundary} write was never made (stuck at {s.step}"
            + (f": work {s.work_id} generation {s.generation}" if s.work_id is not None else "")
            + ")"
            for s in self.stales
            if s.step != "done"
        ]

    def figures(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each scripted write as the worker's log has it: refused, accepted, or never made."""
        rows = []
        for stale in self.stales:
            made = [
                e
                for e in events
                if e.get("e") == "write"
                and e.get("scripted")
                and e["b"] == stale.boundary
                and e["work_id"] == stale.work_id
                and e["gen"] == stale.generation
            ]
            outcome = ("accepted" if made[-1]["ok"] else "refused") if made else "not made"
            rows.append(
                {
                    "boundary": stale.boundary,
                    "work_id": stale.work_id,
                    "generation": stale.generation,
                    "superseded_by": stale.superseded_by,
                    "rearmed": stale.rearmed,
                    "outcome": outcome,
                }
            )
        return rows
