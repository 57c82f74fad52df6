"""A worker's chapter functions and renewer called in sandboxes of its own: the trusted side's
run of exercise 5 (``worker.py --sandboxed``).

The worker process is then the kit's alone: it imports no student code, times the turns, holds
the scan lock and writes every record in its directory, which no sandbox is shown. The chapter
file runs in one sandbox; the answers' ``keep_renewing`` in a second, on a connection made
there, since a renewer runs beside the turn and a sandbox answers one call at a time. Both
sandboxes see the shop's directory and nothing else of the run; a claim made in the first
reaches the second by value.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from lucyshop.lab.sandbox import Remote, Sandbox

PROBES = "lucyshop.lab.sandbox.inside.shop_probes"  # the kit's connection, made in a sandbox


class Sandboxed:
    """The chapter file ``impl`` and the ``exercises.py`` beside it, each in a sandbox of this
    process that may use ``shop``'s directory; both end with the block."""

    def __init__(self, impl: Path, shop: Path, workdir: Path) -> None:
        self.impl, self.shop, self.workdir = impl, shop, workdir
        self.boxes = contextlib.ExitStack()
        self.renewing: Sandbox | None = None

    def __enter__(self) -> Sandboxed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.boxes.close()

    def _box(self, name: str) -> Sandbox:
        box = Sandbox(self.impl, scratch=[self.shop.parent], workdir=self.workdir / name)
        return self.boxes.enter_context(box)

    def chapter(self) -> Remote:
        """The chapter functions (what the worker's own calls reach)."""
        return self._box("chapter").load("ch13_leases.py")

    def answers(self) -> Remote:
        """The answers, for their ``keep_renewing``. The chapter is loaded first, so that a
        claim handed over by value is rebuilt there as the chapter's own ``Claim``."""
        self.renewing = self._box("answers")
        self.renewing.load("ch13_leases.py")
        return self.renewing.load("exercises.py")

    def connect(self, shop: Path) -> Any:
        """A renewer's connection to ``shop``, made in the answers' sandbox."""
        if self.renewing is None:
            raise RuntimeError("no answers were loaded to renew with")
        return self.renewing.kit(PROBES).connect(str(shop))
