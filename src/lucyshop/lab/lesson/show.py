"""What the notebooks print and draw, kept out of the lesson cells.

Tables, the arithmetic the chapter does not ask the student to write (binomial probabilities,
the kill moments of the detection phase), mermaid diagrams built from a checkpoint's own
timeline, and the model a notebook turn runs on: the embedded model when it is built, else
the replies it gave when the notebook was last executed, replayed.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lucyshop.lab.evidence import stats
from lucyshop.lab.evidence.stats import wilson  # noqa: F401 - the notebooks' show.wilson
from lucyshop.lab.lesson.inline import WIDTH, wrap
from lucyshop.lab.loader import ROOT
from lucyshop.lab.statuses import CaseResult, Mark, result_line
from lucyshop.models import EmbeddedModel, ModelUnavailable, Reply, ToolCall

STORED = ROOT / "notebooks" / "stored"
# Set by ``python -m lucyshop.lab.lesson.notebooks``: a live turn's replies are stored for replay.
RECORD = "LUCYSHOP_RECORD_REPLIES"


def say(*parts: Any) -> None:
    """``print(*parts)``, wrapped at word boundaries to the notebook's width (``WIDTH``)."""
    print(wrap(" ".join(str(part) for part in parts)))


def table(rows: Iterable[Sequence[Any]], header: Sequence[str]) -> str:
    """Rows as aligned columns: numbers to three decimals, right-aligned; text left-aligned."""

    def cell(value: Any) -> str:
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    numeric = [all(_is_number(r[i]) for r in cells) for i in range(len(header))]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(header), *(line(r) for r in cells)])


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- Part A arithmetic


def binomial(k: int, n: int, p: float) -> float:
    """P(exactly k of n independent trials), each with probability p."""
    return math.comb(n, k) * p**k * (1 - p) ** (n - k)


def false_expiries(trials: Sequence[Mapping[str, Any]]) -> int:
    """Trials of the false-expiry phase whose lease a replacement took over."""
    return sum(trial["takeover"] is not None for trial in trials)


def kill_moments(detection: Mapping[str, Any]) -> list[tuple[float, float]]:
    """(seconds into the lease when the worker was killed, crash-to-takeover seconds)."""
    return [
        (row["killed_at"] - row["claimed_at"], row["takeover"]["took_at"] - row["killed_at"])
        for row in detection["trials"]
    ]


def capped(turns: Sequence[Mapping[str, Any]], max_tokens: int) -> int:
    """Pilot turns that stopped at the token cap rather than by finishing."""
    return sum(turn["tokens"] >= max_tokens for turn in turns)


# ---------------------------------------------------------------- diagrams


class Diagram:
    """A mermaid diagram as a notebook output: JupyterLab draws its markdown fence; a viewer
    that shows only plain text gets the diagram's source, which reads as a list of steps."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _repr_markdown_(self) -> str:
        return f"```mermaid\n{self.text}\n```"

    def __repr__(self) -> str:
        return self.text


def mermaid(text: str) -> Diagram:
    """A diagram for a notebook's output (see ``Diagram``)."""
    return Diagram(text)


_ACTORS = {
    "enqueued": ("P", "P", "enqueue work {work_id}"),
    "holder ready": ("H", "DB", "claim: generation {generation}, approved order"),
    "competing claim": ("P", "DB", "competing claim gets {got}"),
    "holder exited": ("P", "H", "SIGKILL (exit {status})"),
    # the checkpoint starts waiting after the ready record (and the kill); the lease started at
    # the claim, earlier: so the wait is a little under a lease
    "lease expired": ("DB", "DB", "lease runs out ({waited_seconds}s after the wait began)"),
    "replacement finished": ("R", "DB", "recover_once: {status} at generation {generation}"),
    "stale holder wrote back": ("H", "DB", "stale writes refused: {refused}"),
}


def sequence(timeline: Sequence[Mapping[str, Any]], case: str) -> str:
    """A mermaid sequence diagram of one checkpoint case, one arrow per recorded event."""
    lines = [
        "sequenceDiagram",
        "    participant P as checkpoint",
        "    participant H as holder (child process)",
        "    participant DB as shop database",
        "    participant R as replacement",
    ]
    for event in timeline:
        if event.get("case") != case or event.get("event") not in _ACTORS:
            continue
        source, target, label = _ACTORS[event["event"]]
        facts = dict(event)
        facts["refused"] = ", ".join(
            k for k, v in event.items() if str(v).startswith("PermissionError")
        )
        text = label.format_map(_Missing(facts))
        if source == target:
            lines.append(f"    Note over {source}: t={event['t']:.2f}s {text}")
        else:
            lines.append(f"    {source}->>{target}: t={event['t']:.2f}s {text}")
    return "\n".join(lines)


class _Missing(dict):
    def __missing__(self, key: str) -> str:
        return "?"


# ---------------------------------------------------------------- the model of a turn


class ReplayedModel:
    """The replies the embedded model gave when the notebook was last executed, in order."""

    def __init__(self, path: Path) -> None:
        self.replies = json.loads(path.read_text())
        self.name = "replayed " + self.replies[0]["model"]
        self.file_sha256 = None
        self.calls = 0

    def chat(self, messages: list[dict], tools: Sequence[dict] = (), max_tokens: int = 256):
        stored = self.replies[self.calls % len(self.replies)]
        self.calls += 1
        calls = tuple(ToolCall(c["name"], c["arguments"]) for c in stored["tool_calls"])
        return Reply(stored["text"], calls, stored["tokens"], stored["seconds"])


class RecordingModel:
    """The embedded model, keeping each reply for a notebook run where it is not built."""

    def __init__(self, model: EmbeddedModel, path: Path) -> None:
        self.model, self.path, self.replies = model, path, []
        self.name, self.file_sha256 = model.name, None

    def chat(self, messages: list[dict], tools: Sequence[dict] = (), max_tokens: int = 256):
        reply = self.model.chat(messages, tools, max_tokens)
        self.replies.append(
            {
                "model": self.model.name,
                "text": reply.text,
                "tool_calls": [
                    {"name": c.name, "arguments": c.arguments} for c in reply.tool_calls
                ],
                "tokens": reply.tokens,
                "seconds": round(reply.seconds, 3),
            }
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.replies, indent=1) + "\n")
        return reply


def turn_model(name: str, *, seed: int = 13) -> tuple[Any, str]:
    """The model for a notebook's turn, and one line saying which it is.

    The embedded model when it is built (its replies are stored under ``notebooks/stored``);
    otherwise those stored replies, replayed, with the command that builds the model.
    """
    stored = STORED / f"{name}.json"
    record = os.environ.get(RECORD) == "1"
    try:
        model = EmbeddedModel(seed=seed, temperature=0.0)
    except ModelUnavailable:
        if not stored.is_file():
            raise
        return ReplayedModel(stored), (
            "the embedded model is not built (make model builds it): replaying its stored replies"
        )
    return (RecordingModel(model, stored) if record else model), f"model: {model.name}, live"


# ---------------------------------------------------------------- the checkpoint's evidence


def case(evidence: Mapping[str, Any] | None, name: str) -> Mapping[str, Any]:
    """One passed case of a checkpoint run, or one line saying what to finish first."""
    from lucyshop.lab.lesson.inline import StepMissing

    found = (evidence or {}).get("cases", {}).get(name)
    if found is None:
        raise StepMissing(f"the checkpoint wrote no evidence of its {name!r} case: rerun it")
    if found.get("result") == CaseResult.NOT_STARTED:
        raise StepMissing(
            f"the checkpoint's {name!r} case stopped at {found.get('function')}(), not started:"
            " finish it first, then rerun the checkpoint cell"
        )
    if found.get("result") != CaseResult.PASSING:
        why = found.get("error") or found.get("expectation") or found.get("result")
        raise StepMissing(
            f"the checkpoint's {name!r} case failed ({why}): finish it first"
            " (make check shows what fails), then rerun the checkpoint cell"
        )
    return found


def read_evidence(path: Path) -> dict[str, Any] | None:
    """The evidence a checkpoint run wrote, or None when it wrote none (a stub stopped it)."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def without_paths(text: str, **places: Path) -> str:
    """``text`` with the kit's root dropped and each place named (``<shop>``): no machine's
    absolute paths in a stored output."""
    for name, place in places.items():
        text = text.replace(str(place), f"<{name}>")
    return text.replace(str(ROOT) + "/", "")


def status_report(path: Path, impl: str, **places: Path) -> None:
    """``python -m lucyshop status SHOP --impl IMPL``, printed without absolute paths."""
    import contextlib
    import io

    from lucyshop import status

    if not path.is_file():
        from lucyshop.lab.lesson.inline import StepMissing

        raise StepMissing(
            f"no shop at {path.name}: the checkpoint case that keeps it did not pass;"
            " finish it first (make check shows what fails), then rerun the checkpoint cell"
        )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status.main([str(path), "--impl", impl])
    print(wrap(without_paths(out.getvalue(), **places)), end="")


def receipt_check(mine: Path, leases: Any) -> None:
    """Check the student's own measured receipt: a result line (``statuses.result_line``) that
    says PASSING, FAILING once for each problem, or NOT STARTED while there is none, then its
    headline. The kit's is never printed here: it answers the exercise's question, so it sits
    in a folded cell of its own (``kit_receipt``)."""
    from lucyshop.lab.exercises.exercise_receipts import headline, receipt_problems

    if mine.is_file():
        subject = f"your receipt ({mine.name})"
        problems = receipt_problems(mine, leases)
        for problem in problems:
            say(result_line(Mark.FAIL, subject, problem))
        if not problems:
            say(result_line(Mark.PASS, subject, "every figure recomputed"))
        say("\n".join(headline(json.loads(mine.read_text()))))
        return
    wanted = f"no {mine.name} yet (run the optional cell above)"
    say(result_line(Mark.NOT_STARTED, "your receipt", wanted))


KIT_RECEIPT_HELD = (
    "held until you have written your guesses in the prediction cells above: it holds their"
    " answers. Write them, then rerun this cell"
)


def kit_receipt(kit: Path, *guesses: float | None) -> None:
    """The kit's own receipt of a measured exercise, labelled: for comparison once yours is
    made (13c keeps this cell's output folded). It answers the section's predictions, so,
    like ``reveal``, it shows nothing of itself while any of ``guesses`` is still None."""
    from lucyshop.lab.exercises.exercise_receipts import headline

    said = f"the kit's receipt ({kit.name}), measured on the reference; it is not yours"
    if any(guess is None for guess in guesses):
        say(f"{said}: {KIT_RECEIPT_HELD}")
        return
    say(f"{said}:")
    say("\n".join(headline(json.loads(kit.read_text()))))


# ------------------------------------------------ evidence that needs no learner code

# The reference's checkpoint run, recorded by ``python -m lucyshop.lab.lesson.notebooks``: the
# diagrams
# of 13b show it until the learner's own run passes the case they draw.
REFERENCE_CHECKPOINT = STORED / "checkpoint_reference.json"


def outlive_steps(turns: Sequence[float], grid: Sequence[float]) -> list[tuple[float, float]]:
    """The kit's count, for the evidence plot: the share of ``turns`` longer than each lease."""
    return [(lease, sum(turn > lease for turn in turns) / len(turns)) for lease in grid]


def compare(yours: Any, receipt: Any) -> str:
    """ "matches the receipt" when every number agrees to 1e-9, else both, side by side."""

    def flat(value: Any) -> list[float]:
        if isinstance(value, Mapping):
            return [x for key in sorted(value) for x in flat(value[key])]
        if isinstance(value, list | tuple):
            return [x for item in value for x in flat(item)]
        return [float(value)]

    shown = repr(yours)
    if len(shown) > 2 * WIDTH:  # a curve of 201 points: its start is enough to see what differs
        shown = shown[: 2 * WIDTH] + " ..."
    try:
        mine, theirs = flat(yours), flat(receipt)
    except (TypeError, ValueError):
        return f"differs from the receipt: yours {shown}"
    same = len(mine) == len(theirs) and all(
        math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) for a, b in zip(mine, theirs, strict=False)
    )
    return "matches the receipt" if same else f"differs from the receipt: yours {shown}"


def checkpoint_run(evidence: Mapping[str, Any] | None, name: str) -> Mapping[str, Any]:
    """Your checkpoint's evidence when its ``name`` case passed; else the reference's recorded
    run, saying so in one line, so that the diagram is drawn either way."""
    found = (evidence or {}).get("cases", {}).get(name) or {}
    if found.get("result") == CaseResult.PASSING:
        say(f"your checkpoint run, case {name!r}")
        return evidence
    why = found.get("result") or "no evidence"
    if why == CaseResult.NOT_STARTED:
        why = f"stopped at {found.get('function')}(), not started"
    say(
        f"the reference's recorded run, case {name!r} (yours: {why}; it is drawn from your run"
        " once the case passes)"
    )
    return json.loads(REFERENCE_CHECKPOINT.read_text())


# What 13b's predictions read of each case, besides its timeline: no path, pid or time.
KEPT_CASE_FIELDS = ("result", "ledger_count", "reserved_cents", "spent_cents", "model_calls")


def record_reference_checkpoint(evidence: Path) -> None:
    """Keep what the diagrams need of a reference checkpoint run: its timeline and case results."""
    run = json.loads(evidence.read_text())
    kept = {
        "impl": "solutions/ch13_leases.py",
        "cases": {
            name: {k: case[k] for k in KEPT_CASE_FIELDS if k in case}
            for name, case in run["cases"].items()
        },
        "timeline": [
            {k: v for k, v in event.items() if k not in ("pid", "supplier_pid")}
            for event in run["timeline"]
        ],
    }
    REFERENCE_CHECKPOINT.parent.mkdir(parents=True, exist_ok=True)
    REFERENCE_CHECKPOINT.write_text(json.dumps(kept, indent=1) + "\n")


def postgres_or_stop(stack: Any) -> Any:
    """13d's preflight: a PostgreSQL server entered on ``stack``, or one line saying why there
    is none here and what installs it (the cells after it then print one line each)."""
    from lucyshop.lab.lesson.inline import StepMissing
    from lucyshop.lab.services.postgres import missing, postgres_server

    reason = missing()
    if reason is None:
        try:
            return stack.enter_context(postgres_server())
        except Exception as error:  # noqa: BLE001 any failure to start or reach it: one line
            reason = f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"
    raise StepMissing(
        f"PostgreSQL is not available here ({reason}); `make lab` installs the pg extra,"
        " or set $LUCYSHOP_PG_DSN to a server you may use"
    )


# ---------------------------------------------------------------- predict, then compute


NO_GUESS = "no guess yet: write yours in the cell above, then run this cell to see the answer"


def predicted(
    guess: float | None, measured: float, what: str, unit: str = "", source: str = "measured"
) -> None:
    """One line comparing the learner's number, written in the cell above, with the answer
    (``source`` says where it comes from: "measured", "computed", "the rule"...). Without a
    guess it shows nothing of the answer: only that a guess comes first."""
    unit = unit.replace(" ", "\u00a0")  # a number and its unit stay on one line when wrapped
    if guess is None:
        say(f"{what}: {NO_GUESS}")
        return
    shown = f"your {_figure(guess)}{unit}, {source} {_figure(measured)}{unit}"
    say(f"{what}: {shown}: {_verdict(guess, measured, unit)}")


def _verdict(guess: float, answer: float, unit: str) -> str:
    """ "right" for the answer itself; "within 10%" only for a measured quantity that is not a
    whole count (near a count, a generation or a share of 0 is not right); else how far off,
    in words that say which way."""
    if math.isclose(guess, answer, rel_tol=1e-9, abs_tol=1e-9):
        return "right"
    if not float(answer).is_integer() and math.isclose(guess, answer, rel_tol=0.1):
        return "within 10%"
    gap = _figure(abs(answer - guess))
    return f"{gap}{unit} {'more' if answer > guess else 'less'} than your guess"


def reveal(key: str, guess: float | None) -> None:
    """A prediction's answer beside the learner's guess, one line. The answer is computed in
    ``lucyshop.lab.lesson.answers`` (from the receipts, the reference's recorded run or the
    section's rule), not in the cell, and only once a guess is written."""
    from lucyshop.lab.lesson.answers import ANSWERS

    answer = ANSWERS[key]
    if guess is None:
        say(f"{answer.what()}: {NO_GUESS}")
        return
    predicted(guess, answer.value(), answer.what(), answer.unit, answer.source)


def _figure(value: float, *, sign: bool = False) -> str:
    """A whole number as it is (2700, not 2.7e+03); any other to three significant digits."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):+d}" if sign else f"{int(value)}"
    return f"{value:+.3g}" if sign else f"{value:.3g}"


# ------------------------------------------------ were the pilot and the trials alike?


def beyond(turns: Sequence[float], lease: float) -> int:
    """How many of ``turns`` take longer than ``lease``: the turns a lease would cut off."""
    return sum(turn > lease for turn in turns)


def tail_shares(receipt: Mapping[str, Any]) -> dict[str, Any]:
    """The share of turns longer than the median lease, pilot against trials, from a receipt's
    raw observations: the part of the turn-time distribution that false expiry depends on."""
    observed = receipt["observations"]
    lease = receipt["figures"]["false_expiry"]["median"]["lease"]
    pilot = [turn["seconds"] for turn in observed["pilot"]]
    trials = [
        row["turn_seconds"]
        for phase in observed["false_expiry"].values()
        for row in phase["trials"]
    ]
    k1, k2 = beyond(pilot, lease), beyond(trials, lease)
    return {
        "lease": lease,
        "pilot": (k1, len(pilot)),
        "trials": (k2, len(trials)),
        "p_value": stats.fisher_exact(k1, len(pilot), k2, len(trials)),
    }


# What the notebooks call as ``show.stub``, ``show.given``, ``show.stale_reasons``,
# ``show.swimlanes`` and ``show.skew_bars``: kept in a module of their own.
from lucyshop.lab.lesson.page import (  # noqa: F401
    given,
    skew_bars,
    stale_reasons,
    stub,
    swimlanes,
)
