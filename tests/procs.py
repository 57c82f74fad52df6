"""Finding processes by what their command line mentions (a run's own temporary directory, say)."""

from __future__ import annotations

import os
from pathlib import Path


def processes_mentioning(marker: str) -> list[str]:
    """``"pid: command line"`` of every live process (but this one) whose command line holds
    ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                found.append(f"{entry.name}: {cmdline}")
    return found
