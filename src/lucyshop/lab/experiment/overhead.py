"""What the reference blocker costs on one model turn, measured two ways in one child process.

    python -m lucyshop.lab.experiment.overhead --impl PATH [--turns 6] [--max-tokens 256] ...

The child loads the model twice with one seed (so the n-th turn of each samples the same
tokens), times ``--turns`` turns of the first copy, installs the blocker (``block_for``) and
times the same turns of the second copy. That gives the direct figure: the median of the
paired ratios, blocked over plain. On a busy machine the direct figure is as noisy as the
machine, so the child also counts the audit events one turn raises, by name, and times
``sys.audit`` for each of those events before and after the blocker went in: events per
turn times the blocker's cost per event, over the turn's duration, is the estimate. A
counting hook is installed before either phase, so both pay for it alike.

``blocker_overhead(...)`` runs the child and returns its figures (for the receipt's
provenance); ``python -m lucyshop.lab.experiment.overhead`` prints them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lucyshop.lab.experiment.backend import BACKENDS, model_argv, open_model, warm_up
from lucyshop.lab.experiment.tasks import kind_of, turn_messages
from lucyshop.lab.loader import block_for

PROBE_CALLS = 20_000
TARGET_SHARE = 0.02  # issue 20: the blocker may cost at most 2% of a turn
PROBE_ARGS: dict[str, tuple[Any, ...]] = {"open": (os.devnull, "r", 0)}


def _audit_seconds(event: str) -> float | None:
    """Seconds one ``sys.audit(event, ...)`` takes here and now (None: a hook refused it)."""
    args = PROBE_ARGS.get(event, ())
    try:
        started = time.perf_counter()
        for _ in range(PROBE_CALLS):
            sys.audit(event, *args)
        return (time.perf_counter() - started) / PROBE_CALLS
    except Exception:  # noqa: BLE001 - a hook that judges this event may refuse the probe
        return None


def _turns(model: Any, turns: int, max_tokens: int) -> list[float]:
    return [
        model.chat(turn_messages(kind_of(number)), max_tokens=max_tokens).seconds
        for number in range(turns)
    ]


def measure(
    impl: Path, backend: str, model: str | None, seed: int, turns: int, max_tokens: int
) -> dict[str, Any]:
    """The two figures, in this process; it ends blocked (run it in a child of its own)."""
    events: Counter[str] = Counter()
    sys.addaudithook(lambda event, _args: events.update((event,)))
    plain_model, blocked_model = (open_model(backend, model, seed=seed) for _ in range(2))
    warm_up(plain_model), warm_up(blocked_model)
    events.clear()
    plain = _turns(plain_model, turns, max_tokens)
    probed = sorted({"open", "lucyshop.probe", *events})  # what a turn raises, and two probes
    before = {event: _audit_seconds(event) for event in probed}
    block_for(impl)
    events.clear()
    blocked = _turns(blocked_model, turns, max_tokens)
    per_turn = {event: count / turns for event, count in sorted(events.items())}
    after = {event: _audit_seconds(event) for event in sorted({*probed, *per_turn})}
    extra = {  # None: not measurable (a hook refused the probe, or no turn raised it unblocked)
        event: None
        if after[event] is None or before.get(event) is None
        else max(0.0, after[event] - before[event])
        for event in after
    }
    typical = statistics.median(blocked)
    cost = sum(count * (extra.get(event) or 0.0) for event, count in per_turn.items())
    ratios = [b / p for b, p in zip(blocked, plain, strict=True)]
    return {
        "turns": turns,
        "max_tokens": max_tokens,
        "plain_seconds": plain,
        "blocked_seconds": blocked,
        "measured_share": statistics.median(ratios) - 1.0,
        "events_per_turn": per_turn,
        "extra_seconds_per_event": extra,
        "estimated_share": cost / typical,
        "target_share": TARGET_SHARE,
    }


def blocker_overhead(
    impl: Path,
    backend: str,
    model: str | None,
    *,
    seed: int,
    turns: int,
    max_tokens: int,
    timeout: float,
) -> dict[str, Any]:
    """Run ``measure`` in a fresh child (started unblocked: it blocks itself half-way)."""
    argv = [
        sys.executable,
        "-m",
        "lucyshop.lab.experiment.overhead",
        "--impl",
        str(impl),
        "--turns",
        str(turns),
        "--max-tokens",
        str(max_tokens),
        *model_argv(backend, model, seed),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the overhead child exited {done.returncode}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lucyshop.lab.experiment.overhead")
    parser.add_argument("--impl", type=Path, required=True)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--backend", choices=BACKENDS, default="embedded")
    parser.add_argument("--model")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)
    found = measure(args.impl, args.backend, args.model, args.seed, args.turns, args.max_tokens)
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
