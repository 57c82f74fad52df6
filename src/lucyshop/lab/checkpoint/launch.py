"""How a checkpoint is started as a command, once: ``make check`` watches it, ``make demo``, the
bench and the notebooks' recording run it, and the book's entry runs its file by the same name.

A leaf beside the case list: starting a checkpoint loads neither its runner nor its judge.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from lucyshop.lab.loader import ROOT

SCRIPT = Path("checkpoints") / "ch13_worker_recovery.py"  # from the kit's root
PG_SCRIPT = Path("checkpoints") / "ch13_postgres_recovery.py"  # exercise 7's, on PostgreSQL


def checkpoint_command(
    impl: str | os.PathLike[str],
    *,
    evidence: Path | None = None,
    keep: Path | None = None,
    case_timeout: float | None = None,
    postgres: bool = False,
) -> list[str]:
    """The checkpoint on ``impl``, run by this interpreter: its evidence written to
    ``evidence``, each case's files kept under ``keep``, each case given ``case_timeout``
    seconds (the watcher's own limit, so the two agree); exercise 7's with ``postgres``."""
    argv = [sys.executable, str(ROOT / (PG_SCRIPT if postgres else SCRIPT)), "--impl", str(impl)]
    if evidence is not None:
        argv += ["--evidence", str(evidence)]
    if keep is not None:
        argv += ["--keep", str(keep)]
    if case_timeout is not None:
        argv += ["--case-timeout", f"{case_timeout:g}"]
    return argv
