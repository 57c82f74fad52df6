"""Files a sandbox names: a path that student code returns is data to check, never a fact.

An answer may return any path as its receipt, its shop or its ledger: ``/dev/zero``, a FIFO, a
link out of its scratch, someone else's database. The trusted side reads such a file only when
it is a regular file inside the check's own scratch (``confined_file``), and only through the
bounded, no-follow, non-blocking reader the checkpoint's judge uses (``read_regular``), from
its directory opened name by name without following a link (``beneath``); a
database is opened as a copy made that way, in a directory of the trusted side's own, so no
name the sandbox controls is ever opened by SQLite. Anything else is ``NamedFileRefused``, one line
that names the function whose answer named it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lucyshop.atomic import read_regular
from lucyshop.lab.sandbox.remote import confined_file

MAX_FILE = 64 * 1024 * 1024  # a shop or a ledger
MAX_RECEIPT = 4 * 1024 * 1024  # the committed receipts are under 100 kB
SIDE_FILES = ("-wal",)  # what SQLite keeps beside a database that a copy must carry


class NamedFileRefused(AssertionError):
    """A path from the sandbox that the trusted side will not read: the test fails on it."""


def read_named(
    path: Any, roots: Iterable[Path], function: str, what: str, limit: int = MAX_FILE
) -> bytes:
    """The bytes of the file ``function()`` named as its ``what``; ``NamedFileRefused`` unless
    it is a regular file of at most ``limit`` bytes inside one of ``roots``."""
    if not isinstance(path, str | os.PathLike) or not str(path):
        shown = f"{type(path).__name__} {path!r:.80}"
        raise NamedFileRefused(f"{function}() returned {shown} as its {what}")
    roots = list(roots)
    try:
        real = confined_file(Path(path), roots)
    except ValueError:
        why = "not a regular file of this check's scratch (a link, a special file, or outside)"
        raise NamedFileRefused(refusal(function, what, path, why)) from None
    root = next(root for root in roots if real.is_relative_to(root))
    try:
        with beneath(root, real.parent) as directory:
            return read_regular(real.name, limit, dir_fd=directory)
    except ValueError:  # a FIFO or a device put there since, or too big
        why = f"not a regular file of at most {limit >> 20} MiB"
        raise NamedFileRefused(refusal(function, what, path, why)) from None
    except OSError as error:  # a link put there since (O_NOFOLLOW), or gone
        why = error.strerror or str(error)
        raise NamedFileRefused(refusal(function, what, path, why)) from None


@contextmanager
def beneath(root: Path, directory: Path) -> Iterator[int]:
    """``directory`` (inside ``root``, a directory of ours) opened one name at a time from
    ``root``, never through a link: a name the sandbox swaps for a link after
    ``confined_file`` looked is refused (ELOOP, ENOTDIR), not followed out of the scratch."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in directory.relative_to(root).parts:
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def refusal(function: str, what: str, path: Any, why: str) -> str:
    """One line: the function, what it named, why it is refused, then where (its end)."""
    where = str(path)
    where = where if len(where) <= 60 else "…" + where[-59:]
    return f"{function}() named its {what}: refused, {why}: {where}"


def load_named(path: Any, roots: Iterable[Path], function: str, what: str) -> Any:
    """The JSON document ``function()`` named as its ``what`` (a receipt), read as above."""
    data = read_named(path, roots, function, what, MAX_RECEIPT)
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as error:
        raise NamedFileRefused(refusal(function, what, path, f"not JSON ({error})")) from None


def copy_named(
    path: Any, roots: Iterable[Path], function: str, what: str, into: Path | None = None
) -> Path:
    """A copy of the database ``function()`` named as its ``what`` (with its write-ahead log,
    if any), in a new directory under ``into`` (a directory no sandbox may write); its path."""
    data = read_named(path, roots, function, what)
    copy = Path(tempfile.mkdtemp(prefix="named-", dir=into)) / f"{what}.sqlite"
    copy.write_bytes(data)
    for side in SIDE_FILES:
        beside = Path(f"{path}{side}")
        if os.path.lexists(beside):
            copy.with_name(copy.name + side).write_bytes(
                read_named(beside, roots, function, f"{what}{side}")
            )
    return copy
