"""What a checkpoint's holder child does once it holds the work: the word the trusted side puts
on the holder's command line and the holder acts on.

A leaf, so that each side of the sandbox reads it without reaching the other: the case list
(``lucyshop.lab.checkpoint.cases``) names each case's mode, and the holders
(``lucyshop.lab.sandbox.inside.holder``, ``pg_holder``) parse and obey it.
"""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """One holder's part in its case."""

    KILLED = "killed"  # waits to be killed
    LIVE = "live"  # waits for the release, then tries its stale writes
    PAUSED = "paused"  # the same, paused by the parent in between
    SENDING = "sending"  # sends at once, and is killed while the supplier holds the reply
    CANCEL = "cancel"  # sends one order, gets a second approved, then waits like LIVE
