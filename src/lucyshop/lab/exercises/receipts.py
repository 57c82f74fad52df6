"""Receipts of the measured exercises (13c, exercises 5 and 6): figures derived, and checked.

A receipt is ``{"schema", "exercise", "provenance", "settings", "figures", "observations"}``.
The figures are derived from the raw observations by one function per exercise
(``figures_5``, ``figures_6``), with the chapter-13 functions of whichever implementation is
passed in; ``check_receipt`` derives them again from the stored observations and lists every
figure that differs, every one missing or extra, every provenance field absent, and every
condition of a sound run that does not hold. An empty list means the receipt stands.

What the observations must hold (``lucyshop.lab.exercises.runs`` writes exactly this):

Exercise 5 (renewal). ``pilot``: rows with ``seconds``. ``false_expiry.trials``: the
trial rows, each with ``arm`` (``plain``, ``renewed``, ``bounded``), ``lease``, ``generation``,
``claimed_at``, ``finish_at``, ``turn_seconds``, ``finish`` (accepted/refused), ``takeover``
(the replacement's record with ``took_at`` and ``generation``, or null), ``renewals`` (the
``lease_renewals`` rows of that work: ``generation``, ``progress``, ``progressed_at``,
``renewed_at``, ``expires``) and ``attempts`` (the renewer's log: ``at``, ``granted``).
``detection.trials``: rows with ``killed_at``, ``turns`` (each with ``ended`` once it ended),
``renewals`` and ``takeover``. ``hung``: ``unbounded`` and ``bounded``, each with ``hung``
(``hung_at``), ``killed_at``, ``takeover``, ``renewals``, ``attempts``; the unbounded one also
``window``, ``checked_at``, ``takeover_by_check`` and ``lease_expires_at_check``. Settings
used: ``renew_share``, ``bound_factor``, ``window_factor``, ``scan_seconds``,
``pilot_turns``, ``trials_per_arm``, ``detection_trials``.

Exercise 6 (records). ``operation``; ``records`` (``order`` with ``operation`` and
``status``, ``account``, ``ledger``); ``messages`` (``plain``, ``records``); ``models``: by
name, each with ``backend``, ``plain`` and ``records`` sample lists (``text``, ``calls``).
Settings used: ``samples``.

The receipt's shape is ``schemas/exercise5.json`` or ``schemas/exercise6.json``.

    python -m lucyshop.lab.exercises.receipts FILE [--impl learner|solutions|PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from lucyshop.lab.evidence import receipts
from lucyshop.lab.experiment.receipt import recovery_counts
from lucyshop.lab.experiment.tasks import RECOVERY_TOOLS, crashed_transcript
from lucyshop.lab.loader import block_for, load_impl
from lucyshop.models import parse_tool_calls

SCHEMA = 2
ARMS = ("plain", "renewed", "bounded")
RECOUNTED = "records"  # the key of the records arm in exercise 6


def close(
    exercise: int,
    record: dict[str, Any],
    settings: dict[str, Any],
    observations: dict[str, Any],
    leases: ModuleType,
) -> dict[str, Any]:
    """The finished receipt: provenance completed at the end of the run, figures derived."""
    return {
        "schema": SCHEMA,
        "exercise": exercise,
        "provenance": receipts.finish(record, exercise=exercise),
        "settings": settings,
        "figures": FIGURES[exercise](observations, settings, leases),
        "observations": observations,
    }


# ------------------------------------------------------------------ exercise 5: renewal


def _count(items: Sequence[Any], test: Callable[[Any], bool]) -> int:
    return sum(1 for item in items if test(item))


def figures_5(
    observations: Mapping[str, Any], settings: Mapping[str, Any], leases: ModuleType
) -> dict[str, Any]:
    """Every figure of an exercise-5 receipt, from its observations and settings alone."""
    turns = [row["seconds"] for row in observations["pilot"]]
    lease = leases.percentile(turns, 50)
    longest = leases.percentile(turns, 100)
    interval = lease * settings["renew_share"]
    bound = settings["bound_factor"] * longest
    scan = settings["scan_seconds"]
    return {
        "pilot": {
            "turns": len(turns),
            "p50": lease,
            "p90": leases.percentile(turns, 90),
            "p100": longest,
            "lease": lease,
            "renew_interval": interval,
            "bound": bound,
        },
        "false_expiry": {
            arm: _arm(by_arm(observations)[arm], turns, lease, bound, leases) for arm in ARMS
        },
        "detection": _renewed_detection(
            observations["detection"]["trials"], turns, lease, interval, scan, leases
        ),
        "hung": _hung(observations["hung"], bound, settings["window_factor"], scan),
    }


def by_arm(observations: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    """The false-expiry trials of exercise 5, by arm (the worker interleaved them)."""
    found: dict[str, list[Mapping[str, Any]]] = {arm: [] for arm in ARMS}
    for row in observations["false_expiry"]["trials"]:
        found[row["arm"]].append(row)
    return found


def _arm(
    rows: Sequence[Mapping], turns: Sequence[float], lease: float, bound: float, leases: ModuleType
) -> dict[str, Any]:
    takeovers = [row for row in rows if row["takeover"] is not None]
    renewals = sum(len(row["renewals"]) for row in rows)
    held = sum(row["finish_at"] - row["claimed_at"] for row in rows)
    return {
        "lease": lease,
        "trials": len(rows),
        "predicted_share_without_renewal": leases.false_expiry_share(turns, lease),
        "turns_longer_than_lease": _count(rows, lambda row: row["turn_seconds"] > lease),
        "turns_longer_than_bound": _count(rows, lambda row: row["turn_seconds"] > bound),
        "false_expiries": len(takeovers),
        "measured_share": len(takeovers) / len(rows),
        "worker_finishes_accepted": _count(rows, lambda row: row["finish"] == "accepted"),
        "stale_completions_accepted": _count(takeovers, lambda row: row["finish"] == "accepted"),
        "renewals": renewals,
        "renewals_per_held_second": renewals / held if held > 0 else 0.0,
        "refused_renewals": sum(
            _count(row["attempts"], lambda a: not a["granted"]) for row in rows
        ),
    }


def _renewed_detection(
    rows: Sequence[Mapping],
    turns: Sequence[float],
    lease: float,
    interval: float,
    scan: float,
    leases: ModuleType,
) -> dict[str, Any]:
    delays = [row["takeover"]["took_at"] - row["killed_at"] for row in rows]
    measured = sum(delays) / len(delays)
    predicted = leases.detection_delay(lease, interval, scan)
    safe = 2 * leases.percentile(turns, 100)
    return {
        "lease": lease,
        "renew_interval": interval,
        "scan": scan,
        "trials": len(rows),
        "killed_mid_turn": _count(rows, lambda row: "ended" not in row["turns"][-1]),
        "predicted_delay": predicted,
        "measured_mean_delay": measured,
        "difference": measured - predicted,
        "delays": delays,
        "safe_lease_without_renewal": safe,
        "predicted_delay_without_renewal": leases.detection_delay(safe, lease, scan),
    }


def _hung(
    hung: Mapping[str, Any], bound: float, window_factor: float, scan: float
) -> dict[str, Any]:
    free, capped = hung["unbounded"], hung["bounded"]
    free_hung, capped_hung = free["hung"]["hung_at"], capped["hung"]["hung_at"]
    took = capped["takeover"]["took_at"]
    last_progress = max(row["progressed_at"] for row in capped["renewals"])
    return {
        "unbounded": {
            "window": window_factor * bound,
            "taken_over_within_window": free["takeover_by_check"] is not None,
            "renewals_after_hang_within_window": _count(
                free["renewals"], lambda row: free_hung < row["renewed_at"] <= free["checked_at"]
            ),
            "lease_left_at_window_end": free["lease_expires_at_check"] - free["checked_at"],
            "refused_renewals": _count(free["attempts"], lambda a: not a["granted"]),
            "took_after_kill": free["takeover"]["took_at"] - free["killed_at"],
        },
        "bounded": {
            "bound": bound,
            "renewals_after_hang": _count(
                capped["renewals"], lambda row: row["renewed_at"] > capped_hung
            ),
            "refused_renewals": _count(capped["attempts"], lambda a: not a["granted"]),
            "renewals_after_takeover": _count(
                capped["renewals"], lambda row: row["renewed_at"] >= took
            ),
            "took_after_hang": took - capped_hung,
            "took_after_progress": took - last_progress,
            "predicted_after_progress": bound + scan / 2,
        },
    }


def conditions_5(
    receipt: Mapping[str, Any], recomputed: Mapping[str, Any]
) -> Iterator[tuple[str, bool]]:
    """What must hold of a sound exercise-5 run, beyond its arithmetic."""
    observations, settings = receipt["observations"], receipt["settings"]
    yield (
        f"pilot has {settings['pilot_turns']} turns",
        len(observations["pilot"]) == settings["pilot_turns"],
    )
    lease = recomputed["pilot.lease"]
    arms = by_arm(observations)
    for arm in ARMS:
        rows = arms[arm]
        stale = recomputed[f"false_expiry.{arm}.stale_completions_accepted"]
        yield f"false_expiry.{arm}: stale completions accepted is 0 (saw {stale})", stale == 0
        yield (
            f"false_expiry.{arm}: {settings['trials_per_arm']} trials",
            len(rows) == settings["trials_per_arm"],
        )
        yield (
            f"false_expiry.{arm}: every trial ran under the pilot median {lease!r}",
            {row["lease"] for row in rows} == {lease},
        )
        fenced = all(r["generation"] == row["generation"] for row in rows for r in row["renewals"])
        yield f"false_expiry.{arm}: every renewal was by the trial's own generation", fenced
    yield (
        "false_expiry.plain: the plain arm never renewed",
        all(not row["renewals"] for row in arms["plain"]),
    )
    detection = observations["detection"]["trials"]
    yield (
        f"detection: {settings['detection_trials']} trials",
        len(detection) == settings["detection_trials"],
    )
    yield (
        "detection: every takeover is by a later generation",
        all(row["takeover"]["generation"] > row["generation"] for row in detection),
    )
    free, capped = observations["hung"]["unbounded"], observations["hung"]["bounded"]
    yield (
        "hung.unbounded: not taken over within the window (the renewer kept the lease alive)",
        not recomputed["hung.unbounded.taken_over_within_window"],
    )
    yield (
        "hung.unbounded: its renewals went on after the hang",
        recomputed["hung.unbounded.renewals_after_hang_within_window"] > 0,
    )
    yield (
        "hung.bounded: taken over by a later generation",
        capped["takeover"]["generation"] > capped["hung"]["generation"],
    )
    yield (
        "hung.bounded: a renewal was refused, and none was granted after the takeover",
        recomputed["hung.bounded.refused_renewals"] > 0
        and recomputed["hung.bounded.renewals_after_takeover"] == 0,
    )
    yield (
        "hung: both hung workers were taken over in the end",
        free["outcome"] is not None
        and capped["outcome"] is not None
        and free["outcome"]["generation"] == free["takeover"]["generation"]
        and capped["outcome"]["generation"] == capped["takeover"]["generation"],
    )


# ------------------------------------------------------------------ exercise 6: records


def figures_6(
    observations: Mapping[str, Any], settings: Mapping[str, Any], leases: ModuleType
) -> dict[str, Any]:
    """Every figure of an exercise-6 receipt: per model, the counts with and without the records."""
    operation = observations["operation"]
    found: dict[str, Any] = {}
    for name, model in observations["models"].items():
        plain = _counts(model["plain"], operation)
        given = _counts(model[RECOUNTED], operation)
        found[name] = {
            "plain": plain,
            "records": given,
            "change": {
                key: given[key] - plain[key]
                for key in (
                    "placed_again",
                    "placed_under_another_key",
                    "looked_up_right_key",
                    "neither",
                )
            },
        }
    records = observations["records"]
    return {
        "records": {
            "order_status": records["order"]["status"],
            "reserved_cents": records["account"]["reserved_cents"],
            "ledger_orders": len(records["ledger"]),
        },
        "models": found,
    }


def _counts(samples: Sequence[Mapping], operation: str) -> dict[str, int]:
    """The experiment's recovery counts, and how many samples placed the order under a key
    that is not the shop's (missing or invented): the re-order the supplier cannot catch."""
    other = _count(
        samples,
        lambda sample: any(
            call["name"] == "place_order" and call["arguments"].get("operation") != operation
            for call in sample["calls"]
        ),
    )
    return recovery_counts(samples, operation) | {"placed_under_another_key": other}


def _tool_parameters() -> dict[str, list[str]]:
    return {
        tool["function"]["name"]: list(tool["function"]["parameters"]["properties"])
        for tool in RECOVERY_TOOLS
    }


def conditions_6(
    receipt: Mapping[str, Any], recomputed: Mapping[str, Any]
) -> Iterator[tuple[str, bool]]:
    """What must hold of a sound exercise-6 run, beyond its counting."""
    observations, settings = receipt["observations"], receipt["settings"]
    operation = observations["operation"]
    records = observations["records"]
    plain, given = observations["messages"]["plain"], observations["messages"]["records"]
    yield (
        "the plain transcript is the experiment's crashed transcript",
        plain == crashed_transcript(operation),
    )
    yield (
        "the records transcript differs from it only in its last message",
        given[:-1] == plain[:-1] and given[-1] != plain[-1],
    )
    last = given[-1]["content"]
    yield (
        "the records message names the operation key, UNKNOWN and lookup_order",
        operation in last and "UNKNOWN" in last and "lookup_order" in last,
    )
    yield (
        "the records were true: the shop's order is UNKNOWN with its money reserved",
        records["order"]["operation"] == operation
        and records["order"]["status"] == "UNKNOWN"
        and records["account"]["reserved_cents"] == records["order"]["amount_cents"],
    )
    yield (
        "the supplier's ledger holds that one order",
        [row["operation"] for row in records["ledger"]] == [operation],
    )
    yield ("at least one model was sampled", bool(observations["models"]))
    names = _tool_parameters()
    for name, model in observations["models"].items():
        for arm in ("plain", RECOUNTED):
            samples = model[arm]
            yield (
                f"{name}.{arm}: {settings['samples']} samples",
                len(samples) == settings["samples"],
            )
            if model["backend"] in ("embedded", "scripted"):  # calls written as text
                reparsed = all(
                    [
                        {"name": c.name, "arguments": c.arguments}
                        for c in parse_tool_calls(s["text"], names)
                    ]
                    == s["calls"]
                    for s in samples
                )
                yield f"{name}.{arm}: every sample's calls are the ones its text makes", reparsed


FIGURES: dict[int, Callable[..., dict[str, Any]]] = {5: figures_5, 6: figures_6}
CONDITIONS = {5: conditions_5, 6: conditions_6}


# ------------------------------------------------------------------ the check


def check_receipt(path: str | os.PathLike, leases: ModuleType | None = None) -> list[str]:
    """Every way the receipt at ``path`` fails to stand, one line each; ``[]`` when it stands.

    Its figures are recomputed from its observations with ``leases`` (default: the
    implementation ``$LEASES_IMPL`` names) and compared, and the conditions of a sound run
    checked. Its shape is ``shape_problems``'s (kept apart: importing jsonschema costs seconds,
    and ``make check`` runs this for every quick receipt).
    """
    path = Path(path)
    try:
        receipt = receipts.read_receipt(path)
        exercise = receipt["exercise"]
        if exercise not in FIGURES:
            return [f"{path}: exercise {exercise!r} has no receipt check (5 or 6)"]
        if receipt.get("schema") != SCHEMA:
            again = f"python solutions/exercises.py {exercise} --out {path}"
            return [f"{path} is a schema {receipt.get('schema')!r} receipt, not {SCHEMA}: {again}"]
        leases = leases if leases is not None else load_impl()
        recomputed = FIGURES[exercise](receipt["observations"], receipt["settings"], leases)
        compared = receipts.compare(receipt["figures"], recomputed)
    except (OSError, ValueError, KeyError, TypeError, IndexError, ZeroDivisionError) as error:
        return [f"{path} is not a receipt this check can read: {type(error).__name__}: {error}"]
    problems = [f"figures.{name}: {why}" for name, why in compared if why]
    try:
        problems += [
            f"condition failed: {what}"
            for what, ok in CONDITIONS[exercise](receipt, receipts.flat(recomputed))
            if not ok
        ]
    except (KeyError, TypeError, IndexError, ValueError) as error:
        problems.append(
            f"the observations lack what a condition reads: {type(error).__name__}: {error}"
        )
    return problems


def shape_problems(path: str | os.PathLike) -> list[str]:
    """Every way the receipt breaks its schema (``schemas/exercise5.json`` or ``exercise6``)."""
    receipt = receipts.read_receipt(path)
    return [f"shape: {p}" for p in receipts.validate(receipt, f"exercise{receipt['exercise']}")]


def headline(receipt: Mapping[str, Any]) -> list[str]:
    """The receipt's main figures, one line each, for a terminal."""
    figures = receipt["figures"]
    if receipt["exercise"] == 5:
        pilot, det, hung = figures["pilot"], figures["detection"], figures["hung"]
        lines = [
            (
                f"pilot: {pilot['turns']} turns, p50 {pilot['p50']:.3f} s (the lease), "
                f"p100 {pilot['p100']:.3f} s; renewal every {pilot['renew_interval']:.3f} s; "
                f"bound {pilot['bound']:.3f} s"
            )
        ]
        for arm in ARMS:
            row = figures["false_expiry"][arm]
            lines.append(
                f"{arm}: false expiry {row['false_expiries']} of {row['trials']} (predicted "
                f"without renewal {row['predicted_share_without_renewal']:.3f}), stale completions "
                f"accepted {row['stale_completions_accepted']}, "
                f"{row['renewals_per_held_second']:.2f} renewals/s; turns longer than the lease "
                f"{row['turns_longer_than_lease']}, than the bound {row['turns_longer_than_bound']}"
            )
        lines.append(
            f"detection with renewal: predicted {det['predicted_delay']:.3f} s, measured mean "
            f"{det['measured_mean_delay']:.3f} s over {det['trials']} kills (without renewal, "
            f"lease {det['safe_lease_without_renewal']:.3f} s: predicted "
            f"{det['predicted_delay_without_renewal']:.3f} s)"
        )
        free, capped = hung["unbounded"], hung["bounded"]
        lines.append(
            f"hung, unbounded renewer: taken over within {free['window']:.3f} s: "
            f"{free['taken_over_within_window']}; {free['renewals_after_hang_within_window']} "
            f"renewals after the hang; lease left {free['lease_left_at_window_end']:.3f} s"
        )
        lines.append(
            f"hung, bounded renewer: taken over {capped['took_after_progress']:.3f} s after its "
            f"last progress (predicted {capped['predicted_after_progress']:.3f} s); "
            f"{capped['refused_renewals']} renewal refused"
        )
        return lines
    records = figures["records"]
    lines = [
        (
            f"records: order {records['order_status']}, {records['reserved_cents']} cents "
            f"reserved, {records['ledger_orders']} order in the supplier's ledger"
        )
    ]
    for name, counts in figures["models"].items():
        for arm in ("plain", "records"):
            c = counts[arm]
            lines.append(
                f"{name}, {arm}: {c['samples']} samples, placed again {c['placed_again']}, looked "
                f"up with the right key {c['looked_up_right_key']}, neither {c['neither']}; placed "
                f"under another key {c['placed_under_another_key']}"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.exercises.receipts",
        description="recompute an exercise receipt from its observations",
    )
    parser.add_argument("receipt", type=Path)
    parser.add_argument(
        "--impl", default=None, help="learner, solutions or a path (default: $LEASES_IMPL)"
    )
    args = parser.parse_args(argv)
    block_for(args.impl)  # the check may use only the implementation named
    problems = check_receipt(args.receipt, load_impl(args.impl)) + shape_problems(args.receipt)
    for problem in problems:
        print(f"FAIL  {problem}")
    print(f"receipt check {'FAILED' if problems else 'passed'}: {args.receipt}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
