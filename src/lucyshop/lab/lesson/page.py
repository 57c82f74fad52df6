"""What a notebook shows beside the lesson: the stub the learner is about to write, as their
file has it, and which check refused a stale holder in a checkpoint case."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lucyshop.lab.checkpoint.cases import HELD


def stub(module: Any, name: str) -> None:
    """The signature and docstring of ``name`` (``Class.member`` for a method) as the learner's
    file has them: what the section asks you to write, without opening the file."""
    from lucyshop.lab.given.stubs import functions_in
    from lucyshop.lab.lesson.inline import wrap
    from lucyshop.lab.lesson.show import say, without_paths

    path = Path(module.__file__)
    source = path.read_text()
    found = dict(functions_in(ast.parse(source))).get(name)
    if found is None:
        say(f"{name} is not in {without_paths(str(path))}")
        return
    lines = source.splitlines()
    first = min([found.lineno, *(d.lineno for d in found.decorator_list)])
    body = found.body[0]
    has_doc = isinstance(body, ast.Expr) and isinstance(getattr(body, "value", None), ast.Constant)
    last = body.end_lineno if has_doc else body.lineno - 1
    shown = [line for line in lines[first - 1 : last] if line.strip()]
    print(f"# {without_paths(str(path))}, line {first}")
    print(wrap("\n".join(shown)))  # a line past the notebook's width breaks between words


# ------------------------------------------------ which fence refused a stale holder

FENCES = (
    ("is finished, not running", "the state check: the work is no longer running"),
    ("superseded by generation", "the generation check: a newer claim holds the lease"),
    ("not held by", "chapter 11's holder check in execute: the work row names another worker id"),
    ("expired", "the expiry check: the lease ran out"),
)


def fence_of(reason: str) -> str:
    """Which check a ``PermissionError`` reason comes from, by its wording in the reference."""
    return next((fence for words, fence in FENCES if words in reason), "another check")


def stale_reasons(evidence: Mapping[str, Any] | None, name: str, case: str) -> None:
    """The refusals a stale holder met at each boundary in checkpoint case ``name``, with the
    reason and the fence that gave it: your run once the case passed, else the reference's."""
    from lucyshop.lab.lesson.show import checkpoint_run, say

    run = checkpoint_run(evidence, name)
    found = (run.get("cases", {}).get(name) or {}).get("stale_child_reported")
    if found is None:  # the reference's record keeps the timeline, not the case's fields
        found = next(
            e
            for e in run["timeline"]
            if e.get("case") == case and e["event"] == "stale holder wrote back"
        )
    for boundary in ("transcript", "completion", "supplier"):
        reason = str(found.get(boundary, "?"))
        say(f"{boundary:10} {reason}")
        say(f"{'':10}   refused by {fence_of(reason)}")


# ------------------------------------------------ the checkpoint's cases as swimlanes

LANES = ("checkpoint", "holder", "shop database", "replacement", "supplier")
# The timeline's case key (its tag), and the case (its name is the evidence's).
LANED = {case.tag: case for case in HELD}
EVENTS = {  # event -> (lane, label)
    "enqueued": ("checkpoint", "enqueue"),
    "holder ready": ("holder", "claim g{generation}"),
    "competing claim": ("checkpoint", "rival claim: {got}"),
    "holder exited": ("holder", "SIGKILL"),
    "holder stopped": ("holder", "SIGSTOP"),
    "holder continued": ("holder", "SIGCONT"),
    "lease expired": ("shop database", "lease ran out"),
    "replacement holds the work": ("replacement", "claim g{generation}"),
    "replacement finished": ("replacement", "{status} g{generation}"),
    "stale holder wrote back": ("holder", "3 writes refused"),
    "supplier committed; reply held back": ("supplier", "order committed"),
    "operator cancelled": ("checkpoint", "cancel: g{generation}"),
    "reconciled": ("supplier", "looked up"),
}


def swimlanes(run: Mapping[str, Any]) -> Any:
    """Each process case of a checkpoint run as swimlanes from its timeline: one lane per
    actor, the supplier's own ledger count at the end of its lane. Returns the figure."""
    import matplotlib.pyplot as plt

    figure, panels = plt.subplots(len(LANED), 1, figsize=(10, 2.4 * len(LANED)))
    for axes, (key, case) in zip(panels, LANED.items(), strict=True):
        name = case.name
        events = [e for e in run["timeline"] if e.get("case") == key and e["event"] in EVENTS]
        start = min(e["t"] for e in events)
        end = max(e["t"] for e in events) - start
        last: dict[str, float] = {}  # each lane's previous event: a close one is labelled below
        for event in events:
            lane, label = EVENTS[event["event"]]
            y = LANES.index(lane)
            x = event["t"] - start
            facts = {**event, "got": "nothing" if event.get("got") is None else "work"}
            below = lane in last and x - last[lane] < 0.3 * max(end, 1.0)
            last[lane] = x
            axes.plot([x], [y], "o", color=f"C{y}")
            axes.annotate(
                label.format_map(_Blank(facts)),
                (x, y),
                textcoords="offset points",
                xytext=(4, -13 if below else 5),
                fontsize=9,
            )
        ledger = (run.get("cases", {}).get(name) or {}).get("ledger_count")
        if ledger is not None:
            axes.annotate(
                f"ledger: {ledger} order" + ("" if ledger == 1 else "s"),
                (end, LANES.index("supplier")),
                textcoords="offset points",
                xytext=(-10, 5),
                ha="right",
                fontsize=9,
            )
        axes.set_yticks(range(len(LANES)), LANES, fontsize=9)
        axes.set_ylim(-0.7, len(LANES) - 0.3)
        axes.set_xlim(-0.1, end * 1.25 + 0.2)
        axes.set_title(f"case: {name}", fontsize=10, loc="left")
        axes.grid(axis="y", color="0.9")
    panels[-1].set_xlabel("seconds since the case began")
    figure.tight_layout()
    return figure


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return "?"
