"""Exercise 6's receipt (records): per model, the recovery counts with and without the shop's
records, and what a sound run must show.

What the observations must hold (``lucyshop.lab.exercises.runs`` writes exactly this):
Exercise 6 (records). ``operation``; ``records`` (``order`` with ``operation`` and
``status``, ``account``, ``ledger``); ``messages`` (``plain``, ``records``); ``models``: by
name, each with ``backend``, ``plain`` and ``records`` sample lists (``text``, ``calls``).
Settings used: ``samples``.

``exercise_receipts`` closes and verifies a receipt of either exercise; this module holds
exercise 6's arithmetic alone, as ``renewal`` holds exercise 5's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

from lucyshop.lab.experiment.receipt import recovery_counts
from lucyshop.lab.model.tasks import RECOVERY_TOOLS, crashed_transcript
from lucyshop.models import parse_tool_calls

RECOUNTED = "records"  # the key of the records arm


def figures(
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
    other = sum(
        1
        for sample in samples
        if any(
            call["name"] == "place_order" and call["arguments"].get("operation") != operation
            for call in sample["calls"]
        )
    )
    return recovery_counts(samples, operation) | {"placed_under_another_key": other}


def _tool_parameters() -> dict[str, list[str]]:
    return {
        tool["function"]["name"]: list(tool["function"]["parameters"]["properties"])
        for tool in RECOVERY_TOOLS
    }


def conditions(
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


def headline(figures: Mapping[str, Any]) -> list[str]:
    """The main figures of an exercise-6 receipt, one line each, for a terminal."""
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
