"""What a notebook shows beside the lesson: the stub the learner is about to write, as their
file has it, and which check refused a stale holder in a checkpoint case."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lucyshop.lab.checkpoint.cases import HELD
from lucyshop.lab.given.stubs import functions_in


def stub(module: Any, name: str) -> None:
    """The signature and docstring of ``name`` (``Class.member`` for a method) as the learner's
    file has them: what the section asks you to write, without opening the file."""
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


def given(module: Any, *names: str) -> None:
    """The parts the chapter hands over ready-made (a function, a class member or a module-level
    name such as ``LEASE_MIGRATIONS``), whole, as the learner's file has them: to read, not to
    write."""
    from lucyshop.lab.lesson.inline import wrap
    from lucyshop.lab.lesson.show import say, without_paths

    path = Path(module.__file__)
    source = path.read_text()
    tree = ast.parse(source)
    found = dict(functions_in(tree))
    for node in tree.body:  # a name bound at the top of the file: LEASE_MIGRATIONS = {...}
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        found |= {t.id: node for t in targets if isinstance(t, ast.Name)}
    lines = source.splitlines()
    for name in names:
        node = found.get(name)
        if node is None:
            say(f"{name} is not in {without_paths(str(path))}")
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        print(f"# {without_paths(str(path))}, line {first}")
        print(wrap("\n".join(lines[first - 1 : node.end_lineno])))


# ------------------------------------------------ which fence refused a stale holder

# Its wording in the reference, first match wins: chapter 11's execute says "not held by",
# the reference's assert_current "is held by ..., not ..." for the worker id comparison.
FENCES = (
    ("not running", "the state check: the work is no longer running"),
    ("is superseded by", "the generation check: a newer claim holds the lease"),
    ("not held by", "chapter 11's holder check in execute: the work row names another worker id"),
    ("is held by", "the worker id check: the work row names another acquisition"),
    ("has expired", "the expiry check: the lease ran out"),
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
# Where a label sits from its dot, in points: above, then below; a third tier, further up, when
# both are taken. A lane is about 30 points tall, so a label below one lane stays clear of the
# labels above the next.
TIERS = ((4, 4), (4, -11), (4, 13))
CHAR_POINTS = 5.4  # the width of one character of a 9-point label, near enough to keep apart


def _supplier_event(events: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """What the supplier saw of the replacement: the order it sent, or the lookup of an order
    the holder had sent before it died (the supplier committed it already)."""
    done = next((e for e in events if e["event"] == "replacement finished"), None)
    if done is None or done.get("status") not in ("DONE", "ACCEPTED"):
        return None
    committed = any(e["event"] == "supplier committed; reply held back" for e in events)
    label = "looked up: found" if committed else f"order from g{done.get('generation', '?')}"
    return {"t": done["t"], "label": label}


def swimlanes(run: Mapping[str, Any]) -> Any:
    """Each process case of a checkpoint run as swimlanes from its timeline: one lane per
    actor, the supplier's own ledger count at the end of its lane, a dotted line where the
    lease ran out. Each panel has its own time scale, printed in its title; labels that would
    overlap in a lane move to another tier. Returns the figure."""
    import matplotlib.pyplot as plt

    figure, panels = plt.subplots(len(LANED), 1, figsize=(10, 3.4 * len(LANED)))
    timed = {key: [e["t"] for e in run["timeline"] if e.get("case") == key] for key in LANED}
    spans = {key: max(times) - min(times) for key, times in timed.items()}
    for axes, (key, case) in zip(panels, LANED.items(), strict=True):
        events = [e for e in run["timeline"] if e.get("case") == key and e["event"] in EVENTS]
        start = min(e["t"] for e in events)
        end = max(e["t"] for e in events) - start
        width = end * 1.45 + 0.05
        points = 10 * 72 * 0.85 / width  # points per second along this panel's x axis
        marks = [
            (
                e["t"] - start,
                *EVENTS[e["event"]],
                {**e, "got": "nothing" if e.get("got") is None else "work"},
            )
            for e in events
        ]
        sent = _supplier_event(events)
        if sent is not None:
            marks.append((sent["t"] - start, "supplier", sent["label"], {}))
        placed: dict[tuple[str, int], float] = {}  # (lane, tier) -> where its last label ends
        for x, lane, label, facts in sorted(marks, key=lambda mark: mark[0]):
            y = LANES.index(lane)
            text = label.format_map(_Blank(facts))
            at = x * points
            tier = next(
                (i for i in range(len(TIERS)) if placed.get((lane, i), -1e9) < at), len(TIERS) - 1
            )
            placed[(lane, tier)] = at + TIERS[tier][0] + CHAR_POINTS * len(text)
            axes.plot([x], [y], "o", color=f"C{y}")
            axes.annotate(text, (x, y), textcoords="offset points", xytext=TIERS[tier], fontsize=9)
            if lane == "shop database":
                axes.axvline(x, color="0.6", ls=":", lw=1)
        ledger = (run.get("cases", {}).get(case.name) or {}).get("ledger_count")
        if ledger is not None:
            axes.annotate(
                f"ledger: {ledger} order" + ("" if ledger == 1 else "s"),
                (width, LANES.index("supplier")),
                textcoords="offset points",
                xytext=(-4, -13),
                ha="right",
                fontsize=9,
            )
        axes.set_yticks(range(len(LANES)), LANES, fontsize=9)
        axes.set_ylim(-0.7, len(LANES) - 0.3)
        axes.set_xlim(-0.05 * width, width)
        finer = (
            " (a finer time scale than the others)" if spans[key] < max(spans.values()) / 4 else ""
        )
        axes.set_title(
            f"case: {case.name}: {end:.2f} s from its first event to its last{finer}",
            fontsize=10,
            loc="left",
        )
        axes.set_xlabel("seconds since the case began", fontsize=9)
        axes.grid(axis="y", color="0.9")
    figure.tight_layout()
    return figure


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return "?"


# ------------------------------------------------ 13d's skew trials as bars


def skew_bars(receipt: Mapping[str, Any]) -> Any:
    """The skew trials as bars, one per store, role and shift: the share that went wrong, with
    "k of n" written on it. Top, live holders whose work was taken over; bottom, dead holders
    taken over late (the skew module's own rule for one trial). Returns the figure."""
    import matplotlib.pyplot as plt

    from lucyshop.lab.skew import counts_of

    trials = [t for t in receipt["trials"] if t["arm"] == "fenced"]
    order = {"holder": 0, "none": 1, "taker": 2}  # at shift 0 no clock is shifted
    groups = sorted(
        {(t["shifted"], t["shift_leases"]) for t in trials}, key=lambda g: (order[g[0]], g[1])
    )
    stores = (
        ("sqlite", "SQLite, client clocks", "C0"),
        ("postgres", "PostgreSQL, server clock", "C1"),
    )
    figure, panels = plt.subplots(2, 1, figsize=(14, 7), sharex=True)
    for axes, (fate, count, what) in zip(
        panels,
        (
            ("live", "false_takeover", "live holders whose work was taken over"),
            ("dead", "late_takeover", "dead holders taken over late"),
        ),
        strict=True,
    ):
        for offset, (store, name, colour) in zip((-0.21, 0.21), stores, strict=True):
            for i, (role, shift) in enumerate(groups):
                mine = [
                    t
                    for t in trials
                    if (t["store"], t["shifted"], t["shift_leases"], t["fate"])
                    == (store, role, shift, fate)
                ]
                k = sum(counts_of(t)[count] for t in mine)
                share = k / len(mine) if mine else 0.0
                axes.bar(i + offset, share, width=0.4, color=colour, label=name if i == 0 else None)
                axes.annotate(
                    f"{k} of {len(mine)}",
                    (i + offset, share),
                    textcoords="offset points",
                    xytext=(0, 3),
                    ha="center",
                    va="bottom",
                    rotation=90,
                    fontsize=9,
                )
        axes.set_ylim(0, 1.5)
        axes.set_ylabel("share of trials", fontsize=9)
        axes.set_title(what, fontsize=10, loc="left")
        axes.set_yticks([0, 0.5, 1])
        axes.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))
    labels = [f"{role}\n{shift:+g}" for role, shift in groups]
    panels[-1].set_xticks(range(len(groups)), labels, fontsize=9)
    panels[-1].set_xlabel("whose clock was shifted, and by how many leases", fontsize=10)
    figure.tight_layout()
    return figure
