"""The experiment end to end: open the models, run the four phases in order, write the receipt.

The leases under test come from the pilot, so the phases cannot be reordered: the pilot's
turns give p50, p90 and the maximum; false expiry runs a worker under each of the three rules;
detection runs under the safe one (twice the maximum) with the pilot median as the typical turn.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lucyshop.lab.evidence import receipts
from lucyshop.lab.experiment import phases
from lucyshop.lab.experiment.overhead import blocker_overhead
from lucyshop.lab.experiment.receipt import RULES, SCHEMA, TARGETS, figures, rule_leases
from lucyshop.lab.loader import load_impl
from lucyshop.lab.model.backend import TEMPERATURE, describe, open_model, warm_up
from lucyshop.lab.model.tasks import KINDS, OPERATION, RECOVERY_TOOLS, crashed_transcript
from lucyshop.lab.services.processes import SharedGroupChildren

SCAN_SECONDS = 0.05
OVERHEAD_PAIRS = {"full": 20, "quick": 2}  # turn pairs, plain against blocked
HERE = Path(__file__).resolve().parent
# the experiment's own code and the models it drives, by sha256 in the provenance
CODE = sorted([*HERE.glob("*.py"), *(HERE.parent / "model").glob("*.py")])


@dataclass(frozen=True)
class Settings:
    out: Path
    backend: str
    model: str | None
    recovery_models: tuple[str | None, ...]
    pilot: int
    trials: int
    max_tokens: int
    seed: int
    impl: Path
    quick: bool


def seeds_for(seed: int, trials: int, models: int) -> dict[str, Any]:
    """Every seed of a run, from one: far apart, so that no two processes repeat a sample."""
    return {
        "pilot": seed,
        "false_expiry": {rule: seed + 100_000 * (number + 1) for number, rule in enumerate(RULES)},
        "kill_offsets": seed,
        "detection": [seed + 400_000 + 1_000 * trial for trial in range(trials)],
        "recovery": [seed + 500_000 + 10_000 * model for model in range(models)],
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
        leases.finish(db, leases.claim(db, "probe", ttl=60), "DONE", {"probe": True})
        db.close()


def run(settings: Settings, argv: Sequence[str]) -> dict[str, Any]:
    """Run the four phases and write the receipt to ``settings.out``; return it."""
    leases = load_impl(settings.impl)
    require_started(leases)
    seeds = seeds_for(settings.seed, settings.trials, len(settings.recovery_models))
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
        with bar(len(RULES) * settings.trials, "2 false expiry", "trial") as progress:
            expiry = {
                rule: phases.false_expiry(
                    lab, rule, rules[rule], settings.trials, seeds["false_expiry"][rule], progress
                )
                for rule in RULES
            }
        offsets = phases.kill_offsets(
            leases.percentile(turns, 50), settings.trials, seeds["kill_offsets"]
        )
        with bar(settings.trials, "3 detection", "kill") as progress:
            detection = phases.detection(
                lab, rules["twice_max"], offsets, seeds["detection"], progress
            )

    models: dict[str, Any] = {}
    with bar(settings.trials * len(settings.recovery_models), "4 recovery", "sample") as progress:
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
        "false_expiry": expiry,
        "detection": detection,
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
        "detection_trials": settings.trials,
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
    found = figures_["detection"]
    lines.append(
        f"detection under the {found['lease']:.3f} s lease (typical turn "
        f"{found['typical_turn']:.3f} s, scan {found['scan']:g} s, {found['trials']} kills): "
        f"predicted {found['predicted_delay']:.3f} s, measured mean "
        f"{found['measured_mean_delay']:.3f} s, difference {found['difference']:+.3f} s; "
        f"from the actual kill moments {found['predicted_from_kill_moments']:.3f} s "
        f"(difference {found['difference_from_kill_moments']:+.3f} s)"
    )
    times = figures_["turn_times"]
    test = times["mann_whitney"]
    overhead = receipt["provenance"]["blocker_overhead"]
    lines.append(
        f"turn times, pilot vs trials: medians {times['pilot_median']:.3f} s and "
        f"{times['trials_median']:.3f} s (ratio {times['median_ratio']:.3f}); Mann-Whitney U "
        f"{test['u']:g}, p {test['p_value']:.3f} ({test['method']}); blocker overhead "
        f"measured {overhead['measured_share']:+.2%} over {overhead['pairs']} paired turns "
        f"(interval {overhead['measured_interval'][0]:+.2%} to "
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
