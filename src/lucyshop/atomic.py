"""Files that a reader sees whole or not at all: a ready file, a receipt; and their reading
where another process could have put something else at the name.

A process that announces itself (a supplier's port, a worker's pid) writes a small JSON file
that another process polls for, and a measurement writes its receipt. A half-written file would
be read as garbage, so the text goes to a temporary file beside the target, is flushed to disk,
and is renamed over it. This is the kit's one such writer.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any


def write_text(path: str | os.PathLike[str], text: str, *, durable: bool = False) -> None:
    """Write ``text`` so that a reader sees either the old file (or none) or the whole new one.

    The temporary file is in the same directory, so the rename cannot cross a file system;
    ``os.replace`` is atomic on POSIX. ``durable`` also fsyncs the directory, so that the
    rename itself survives a crash (a receipt; a ready file only has to be whole).
    """
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # Created here, not by mkstemp: a receipt is readable as any file the umask allows (0600
    # would hide it), and no chmod is needed (the reference blocker vets every chmod).
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        place(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    if durable:
        directory = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def place(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Move a finished file to ``target`` in one rename. Whatever name is at ``target`` (a link
    included) is replaced, never followed; both must be on one file system."""
    os.replace(source, target)


def write_ready(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    """Write ``data`` as JSON so that a reader sees either no file or the whole file."""
    write_text(path, json.dumps(data, sort_keys=True))


def read_regular(path: str | os.PathLike[str], limit: int, *, dir_fd: int | None = None) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes; ValueError
    otherwise. Never through a link (``O_NOFOLLOW``) and never blocking on a FIFO
    (``O_NONBLOCK``): for files in a directory a sandbox can write. FileNotFoundError passes.
    ``dir_fd``: ``path`` is relative to that open directory (``lucyshop.lab.check.named``)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError(f"{path} is not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} is over {limit} bytes")
    return data
