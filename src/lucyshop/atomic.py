"""Files that a reader sees whole or not at all: a ready file, a receipt.

A process that announces itself (a supplier's port, a worker's pid) writes a small JSON file
that another process polls for. A half-written file would be read as garbage, so the text goes
to a temporary file beside the target, is flushed to disk, and is renamed over it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_ready(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    """Write ``data`` as JSON so that a reader sees either no file or the whole file.

    The temporary file is in the same directory, so the rename cannot cross a file system;
    ``os.replace`` is atomic on POSIX.
    """
    target = Path(path)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
