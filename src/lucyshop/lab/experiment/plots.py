"""``python -m lucyshop.lab.experiment.plots RECEIPT [--out-dir evidence]``: draw Part A's two
figures.

Both are drawn from one receipt and nothing else: the curve from its pilot turns (the share of
them longer than each lease, counted here), the points from its figures (``python -m
lucyshop.lab.experiment verify RECEIPT`` proves those follow from its observations). No chapter
implementation is loaded.

- ``ch13-outlive-curve.png``: the share of pilot turns that outlive a lease, as a step curve
  over lease seconds, with the three rules marked and their measured false-expiry shares.
- ``ch13-detection-delays.png``: each detection trial's measured delay against the moment of
  its kill, beside the delay expected for that moment and the predicted mean.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display, no GUI toolkit

import matplotlib.pyplot as plt

from lucyshop.lab.experiment.receipt import RULES, pilot_seconds

OUTLIVE = "ch13-outlive-curve.png"
DELAYS = "ch13-detection-delays.png"
COLOURS = {"median": "tab:red", "p90": "tab:orange", "twice_max": "tab:green"}


def outlive_curve(receipt: dict[str, Any], path: Path) -> None:
    turns = pilot_seconds(receipt["observations"])
    found = receipt["figures"]["false_expiry"]
    # The share only changes at an observed turn, so the curve is exact at these steps.
    steps = [0.0, *sorted(set(turns)), 1.1 * max(found["twice_max"]["lease"], *turns)]
    curve = [(step, sum(turn > step for turn in turns) / len(turns)) for step in steps]
    figure, axes = plt.subplots(figsize=(8, 4.8))
    axes.step(
        [x for x, _ in curve],
        [y for _, y in curve],
        where="post",
        color="black",
        label=f"pilot: share of {len(turns)} turns longer than the lease",
    )
    for rule, named in RULES.items():
        row = found[rule]
        colour = COLOURS[rule]
        axes.axvline(row["lease"], color=colour, linestyle=":", linewidth=1)
        axes.plot(row["lease"], row["predicted_share"], "o", mfc="none", color=colour, markersize=9)
        axes.plot(
            row["lease"],
            row["measured_share"],
            "s",
            color=colour,
            label=(
                f"{named}, {row['lease']:.2f} s: predicted {row['predicted_share']:.2f}, "
                f"measured {row['false_expiries']}/{row['trials']} (p {row['p_value']:.2f})"
            ),
        )
    axes.set_xlabel("lease (seconds)")
    axes.set_ylabel("share of turns that outlive the lease")
    axes.set_ylim(-0.03, 1.03)
    axes.set_title(f"False expiry: {_model(receipt)}  (circles predicted, squares measured)")
    axes.legend(fontsize=8, loc="upper right")
    _save(figure, path)


def detection_delays(receipt: dict[str, Any], path: Path) -> None:
    found = receipt["figures"]["detection"]
    trials = receipt["observations"]["detection"]["trials"]
    offsets = [row["killed_at"] - row["claimed_at"] for row in trials]
    lease, scan = found["lease"], found["scan"]
    figure, axes = plt.subplots(figsize=(8, 4.8))
    axes.plot(
        offsets, found["delays"], "o", color="tab:blue", label=f"measured, {len(trials)} kills"
    )
    span = [0.0, found["typical_turn"]]
    axes.plot(
        span,
        [lease - x + scan / 2 for x in span],
        color="tab:blue",
        linewidth=1,
        alpha=0.5,
        label="expected for a kill at that moment: lease - t + s/2",
    )
    axes.axhline(
        found["predicted_delay"],
        color="black",
        linestyle="--",
        label=f"predicted mean lease - D/2 + s/2 = {found['predicted_delay']:.3f} s",
    )
    axes.axhline(
        found["predicted_from_kill_moments"],
        color="tab:gray",
        linestyle="-.",
        label=f"predicted from these kill moments {found['predicted_from_kill_moments']:.3f} s",
    )
    axes.axhline(
        found["measured_mean_delay"],
        color="tab:red",
        label=(
            f"measured mean {found['measured_mean_delay']:.3f} s "
            f"(difference {found['difference']:+.3f} s)"
        ),
    )
    axes.set_xlabel("kill moment after the lease began (seconds)")
    axes.set_ylabel("seconds from kill to takeover")
    axes.set_title(
        f"Detection: lease {lease:.2f} s, typical turn D {found['typical_turn']:.2f} s, "
        f"scan s {scan:g} s\n{_model(receipt)}",
        fontsize=10,
    )
    axes.legend(fontsize=8, loc="upper right")
    _save(figure, path)


def _model(receipt: dict[str, Any]) -> str:
    return receipt["settings"]["model"]["name"]


def _save(figure: Any, path: Path) -> None:
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.experiment.plots", description=__doc__.split("\n", 1)[0]
    )
    parser.add_argument("receipt", type=Path)
    parser.add_argument("--out-dir", type=Path, default=Path("evidence"))
    args = parser.parse_args(argv)
    receipt = json.loads(args.receipt.read_text(encoding="utf-8"))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for draw, name in ((outlive_curve, OUTLIVE), (detection_delays, DELAYS)):
        draw(receipt, args.out_dir / name)
        print(f"wrote {args.out_dir / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
