"""The experiment end to end: open the models, run the phases in order, write the receipt.

The leases under test come from the pilot, so the pilot comes first: its turns give p50, p90
and the maximum. One worker then runs the trials of all three rules interleaved, the rule
order rotating from one round to the next and every rule meeting the same task kinds, while a
replacement with the same owner label holds what it takes over through the stale writes. The
negative control repeats the median rule's trials against the reference without its
generation fence. The pilot is repeated after the trials, so a drift in the machine's speed
over the run shows. Detection kills workers under two leases (p90 and twice the maximum, at
the same moments) with the pilot median as the typical turn, so the delay's slope is tested.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lucyshop.lab.evidence import receipts
from lucyshop.lab.experiment import phases
from lucyshop.lab.experiment.control import unfenced
from lucyshop.lab.experiment.overhead import blocker_overhead
from lucyshop.lab.experiment.receipt import RULES, SCHEMA, TARGETS, figures, rule_leases
from lucyshop.lab.experiment.worker import WORKER
from lucyshop.lab.loader import load_impl
from lucyshop.lab.model.backend import TEMPERATURE, describe, open_model, warm_up
from lucyshop.lab.model.tasks import KINDS, OPERATION, RECOVERY_TOOLS, crashed_transcript
from lucyshop.lab.services.processes import SharedGroupChildren

SCAN_SECONDS = 0.05
OVERHEAD_PAIRS = {"full": 20, "quick": 2}  # turn pairs, plain against blocked
HOLD_FACTOR = 2.0  # the replacement holds for twice the safe lease: its stale writes come early
HERE = Path(__file__).resolve().parent
# the experiment's own code, the models it drives and its statistics, by sha256 in the provenance
CODE = sorted(
    [
        *HERE.glob("*.py"),
        *(HERE.parent / "model").glob("*.py"),
        HERE.parent / "evidence" / "stats.py",
    ]
)


@dataclass(frozen=True)
class Settings:
    out: Path
    backend: str
    model: str | None
    recovery_models: tuple[str | None, ...]
    pilot: int
    trials: int
    pilot_after: int
    kills: int
    max_tokens: int
    seed: int
    impl: Path
    quick: bool


def seeds_for(seed: int, kills: int, models: int) -> dict[str, Any]:
    """Every seed of a run, from one: far apart, so that no two processes repeat a sample."""
    return {
        "pilot": seed,
        "trials": seed + 100_000,
        "control": seed + 200_000,
        "pilot_after": seed + 300_000,
        "kill_offsets": seed,
        "detection": [seed + 400_000 + 1_000 * trial for trial in range(kills)],
        "detection_short": [seed + 450_000 + 1_000 * trial for trial in range(kills)],
        "recovery": [seed + 500_000 + 10_000 * model for model in range(models)],
    }


def trial_plan(rules: dict[str, float], trials: int) -> list[dict[str, Any]]:
    """``trials`` rounds of one trial per rule, the rule order rotating each round; round j
    gives every rule task kind j, so the three rules meet the same kinds."""
    names = list(RULES)
    return [
        {"rule": rule, "lease": rules[rule], "kind": round_}
        for round_ in range(trials)
        for rule in names[round_ % 3 :] + names[: round_ % 3]
    ]


def by_rule(phase: dict[str, Any], rule: str) -> dict[str, Any]:
    """One rule's trials of the interleaved phase, in the shape of a phase of its own."""
    rows = [row for row in phase["trials"] if row["rule"] == rule]
    return {k: v for k, v in phase.items() if k != "trials"} | {
        "lease": rows[0]["lease"] if rows else None,
        "trials": rows,
    }


def bar(total: int, what: str, unit: str) -> tqdm:
    return tqdm(total=total, desc=what, unit=unit, file=sys.stderr, dynamic_ncols=True)


def require_started(leases: Any) -> None:
    """Raise NotStarted before the first model turn if a function the phases need is still a
    stub."""
    leases.percentile([1.0], 50)
    leases.false_expiry_share([1.0], 1.0)
    leases.shortest_lease([1.0], 0)
    leases.detection_delay(1.0, 1.0, 0.05)
    with tempfile.TemporaryDirectory(prefix="ch13-probe-") as tmp:
        db, queue = leases.open_worker_shop(Path(tmp) / "probe.db")
        leases.enqueue(queue, "probe", "probe", "a probe before the real turns")
        leases.finish(db, leases.claim(db, "probe", ttl=60), "DONE", "a probe")
        db.close()


def run_control(
    lab: phases.Lab, plan: list[dict[str, Any]], seed: int, hold: float, tmp: Path
) -> dict[str, Any]:
    """The median rule's trials again, against the implementation without its generation
    fence; a file whose holder check the control cannot find is recorded as such, untried."""
    try:
        copy = unfenced(lab.impl, tmp / "unfenced.py")
    except ValueError as error:
        return {"unbuilt": str(error), "trials": []}
    with bar(len(plan), "3 control: no generation fence", "trial") as progress:
        control = phases.interleaved(
            dataclasses.replace(lab, impl=copy),
            "control",
            plan,
            seed,
            progress,
            owner=WORKER,
            hold_ttl=hold,
        )
    return control | {"impl": receipts.file_record(copy), "source": receipts.file_record(lab.impl)}


def run(settings: Settings, argv: Sequence[str]) -> dict[str, Any]:
    """Run the four phases and write the receipt to ``settings.out``; return it."""
    leases = load_impl(settings.impl)
    require_started(leases)
    seeds = seeds_for(settings.seed, settings.kills, len(settings.recovery_models))
    model = open_model(settings.backend, settings.model, seed=seeds["pilot"])
    warm = warm_up(model)  # a missing model fails now, not after the phases
    main_model = describe(model)
    del model  # the workers load their own
    for other in settings.recovery_models:
        if other != settings.model:
            warm_up(open_model(settings.backend, other, seed=0))
    record = receipts.provenance(
        command=["-m", "lucyshop.lab.experiment", *argv],
        code=[settings.impl, *CODE],
        model=main_model,
        backend=settings.backend,
    )
    with bar(1, "0 blocker overhead", "run") as progress:
        overhead = blocker_overhead(
            settings.impl,
            settings.backend,
            settings.model,
            seed=seeds["pilot"],
            pairs=OVERHEAD_PAIRS["quick" if settings.quick else "full"],
            max_tokens=settings.max_tokens,
            load_timeout=phases.LOAD_SECONDS,
            turn_timeout=phases.TURN_SECONDS,
        )
        progress.update()

    with (
        tempfile.TemporaryDirectory(prefix="ch13-experiment-") as tmp,
        SharedGroupChildren() as children,
    ):
        lab = phases.Lab(
            leases,
            settings.impl,
            settings.backend,
            settings.model,
            settings.max_tokens,
            SCAN_SECONDS,
            Path(tmp),
            children,
        )
        with bar(settings.pilot, "1 pilot", "turn") as progress:
            pilot = phases.pilot(lab, settings.pilot, seeds["pilot"], progress)
        turns = [row["seconds"] for row in pilot["turns"]]
        rules = rule_leases(turns, leases)
        hold = HOLD_FACTOR * rules["twice_max"]  # the replacement's lease, under no test
        plan = trial_plan(rules, settings.trials)
        with bar(len(plan), "2 false expiry, rules interleaved", "trial") as progress:
            trials = phases.interleaved(
                lab, "trials", plan, seeds["trials"], progress, owner=WORKER, hold_ttl=hold
            )
        median = [step for step in plan if step["rule"] == "median"]
        control = run_control(lab, median, seeds["control"], hold, Path(tmp))
        with bar(settings.pilot_after, "4 pilot again", "turn") as progress:
            after = phases.pilot(
                lab, settings.pilot_after, seeds["pilot_after"], progress, name="pilot-after"
            )
        offsets = phases.kill_offsets(
            leases.percentile(turns, 50), settings.kills, seeds["kill_offsets"]
        )
        detection = {}
        for name, rule in (("detection_short", "p90"), ("detection", "twice_max")):
            with bar(settings.kills, f"5 detection under {rule}", "kill") as progress:
                detection[name] = phases.detection(
                    lab, rules[rule], offsets, seeds[name], progress, name=name, owner=WORKER
                )

    models: dict[str, Any] = {}
    with bar(settings.trials * len(settings.recovery_models), "6 recovery", "sample") as progress:
        for seed, name in zip(seeds["recovery"], settings.recovery_models, strict=True):
            sampled = phases.recovery(
                settings.backend, name, seed, settings.trials, settings.max_tokens, progress
            )
            if sampled["name"] in models:
                raise ValueError(f"two recovery models are both named {sampled['name']!r}")
            models[sampled["name"]] = sampled

    observations = {
        "warm_up": warm,
        "pilot": pilot.pop("turns"),
        "pilot_worker": pilot,
        "false_expiry": {rule: by_rule(trials, rule) for rule in RULES},
        "control": control,
        "pilot_after": after.pop("turns"),
        "pilot_after_worker": after,
        **detection,
        "recovery": {
            "operation": OPERATION,
            "messages": crashed_transcript(OPERATION),
            "tools": RECOVERY_TOOLS,
            "models": models,
        },
    }
    chosen = {
        "backend": settings.backend,
        "model": main_model,
        "recovery_models": list(models),
        "pilot_turns": settings.pilot,
        "pilot_process": "worker",
        "trials_per_rule": settings.trials,
        "trial_order": "one worker, rules interleaved, order rotating each round",
        "replacement": {"owner": WORKER, "lease_factor_of_twice_max": HOLD_FACTOR},
        "control": "the reference without its generation comparison (experiment.control)",
        "pilot_after_turns": settings.pilot_after,
        "detection_trials": settings.kills,
        "detection_rules": ["p90", "twice_max"],
        "recovery_samples": settings.trials,
        "max_tokens": settings.max_tokens,
        "temperature": TEMPERATURE,
        "scan_seconds": SCAN_SECONDS,
        "seed": settings.seed,
        "seeds": seeds,
        "quick": settings.quick,
        "impl": receipts.file_record(settings.impl),
        "task_kinds": list(KINDS),
        "targets": list(TARGETS),
        "rules": RULES,
    }
    receipt = {
        "schema": SCHEMA,
        "provenance": receipts.finish(record, blocker_overhead=overhead),
        "settings": chosen,
        "figures": figures(observations, chosen, leases),
        "observations": observations,
    }
    receipts.write_receipt(settings.out, receipt)
    return receipt


def summary(receipt: dict[str, Any], out: Path) -> str:
    """The headline figures, one line each, for the terminal."""
    figures_, chosen = receipt["figures"], receipt["settings"]
    pilot = figures_["pilot"]
    shortest = " / ".join(f"{value:.3f}" for value in pilot["shortest_lease"].values())
    lines = [
        (
            f"pilot: {pilot['turns']} turns of {chosen['model']['name']}, p50 {pilot['p50']:.3f} "
            f"s, p90 {pilot['p90']:.3f} s, p100 {pilot['p100']:.3f} s"
        ),
        (
            f"shortest lease for a false-expiry share of at most "
            f"{' / '.join(pilot['shortest_lease'])}: {shortest} s"
        ),
    ]
    for rule, named in RULES.items():
        row = figures_["false_expiry"][rule]
        lines.append(
            f"lease at {named}, {row['lease']:.3f} s: false expiry predicted "
            f"{row['predicted_share']:.3f}, measured {row['measured_share']:.3f} "
            f"({row['false_expiries']} of {row['trials']}, two-sided binomial p "
            f"{row['p_value']:.3f}), stale completions accepted "
            f"{row['stale_completions_accepted']}"
        )
    for name in ("fence", "control"):
        fence = figures_[name]
        refused = ", ".join(f"{k} {v}" for k, v in fence["refused_by"].items()) or "none"
        lines.append(
            f"{name}: {fence['stale_writes']} stale writes in {fence['taken_over']} takeovers of"
            f" {fence['trials']} trials, {fence['while_next_generation_held']} while generation"
            f" + 1 held the work; accepted {fence['accepted']}, refused by {refused}"
        )
    for name in ("detection_short", "detection"):
        found = figures_[name]
        lines.append(
            f"detection under the {found['lease']:.3f} s lease (typical turn "
            f"{found['typical_turn']:.3f} s, scan {found['scan']:g} s, {found['trials']} kills): "
            f"predicted {found['predicted_delay']:.3f} s, measured mean "
            f"{found['measured_mean_delay']:.3f} s, difference {found['difference']:+.3f} s"
        )
    slope = figures_["detection_slope"]["measured_slope"]
    lines.append(f"detection slope, delay per second of lease: {slope:.3f} (the formula: 1)")
    times = figures_["turn_times"]
    test = times["mann_whitney"]
    speed = times["seconds_per_token"]
    capped = times["capped"]
    overhead = receipt["provenance"]["blocker_overhead"]
    lines.append(
        f"turn times, pilot vs trials: nearest-rank medians {times['pilot_median']:.3f} s and "
        f"{times['trials_median']:.3f} s; Mann-Whitney p {test['p_value']:.3f}; capped "
        f"{capped['pilot'][0]}/{capped['pilot'][1]} vs {capped['trials'][0]}/"
        f"{capped['trials'][1]} (Fisher p {capped['fisher_p']:.3f}); seconds per token on "
        f"capped turns {_num(speed['pilot_median'])} vs {_num(speed['trials_median'])}, "
        f"after {_num(speed['pilot_after_median'])}"
    )
    lines.append(
        f"blocker overhead measured {overhead['measured_share']:+.2%} over {overhead['pairs']}"
        f" paired turns (interval {overhead['measured_interval'][0]:+.2%} to "
        f"{overhead['measured_interval'][1]:+.2%}), estimated {overhead['estimated_share']:.2%}"
    )
    for name, counts in figures_["recovery"].items():
        lines.append(
            f"recovery, {name}, {counts['samples']} samples: placed again "
            f"{counts['placed_again']}, looked up with the right key "
            f"{counts['looked_up_right_key']}, neither {counts['neither']}"
        )
    lines.append(
        f"receipt: {out} ({receipt['provenance']['seconds']:.0f} s); "
        f"verify it with: python -m lucyshop.lab.experiment verify {out}"
    )
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"
