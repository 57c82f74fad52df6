"""Exercise 5's receipt (renewal): its figures derived from the observations, and what a sound
run must show.

What the observations must hold (``lucyshop.lab.exercises.runs`` writes exactly this):
Exercise 5 (renewal). ``pilot``: rows with ``seconds``. ``false_expiry.trials``: the
trial rows, each with ``arm`` (``plain``, ``renewed``, ``bounded``), ``lease``, ``generation``,
``claimed_at``, ``expires`` (the claim's), ``finish_at``, ``turn_seconds``, ``finish``
(accepted/refused), ``takeover`` (the replacement's record with ``took_at`` and
``generation``, or null), ``watched`` (the measuring side's own reads of that work's lease, as
``[at, generation, expires]`` changes: ``lucyshop.lab.exercises.watch``), ``renewals`` (the
``lease_renewals`` rows of that work: ``generation``, ``progress``, ``progressed_at``,
``renewed_at``, ``expires``) and ``attempts`` (the renewer's log: ``at``, ``granted``).
``detection.trials``: rows with ``generation``, ``expires``, ``killed_at``, ``turns`` (each
with ``ended`` once it ended), ``watched``, ``renewals`` and ``takeover``. ``hung``:
``unbounded`` and ``bounded``, each with ``hung`` (``generation``, ``claimed_at``,
``hung_at``), ``killed_at``, ``takeover``, ``watched``, ``renewals``, ``attempts``; the
unbounded one also ``window``, ``window_ended_at`` (when the measurement looked whether the
hung turn was taken over), ``takeover_in_window`` and ``lease_expires_at_window_end``. Settings
used: ``renew_share``, ``bound_factor``, ``window_factor``, ``scan_seconds``,
``pilot_turns``, ``trials_per_arm``, ``detection_trials``.

The rows and the log are the answers' own record, written by their code with times it
chooses: figures count them, but no condition of a sound run rests on them alone. What the
renewer did to the leases is judged by ``watched``, the measuring side's own observation: a
lease seen extended past the claim's end (``extensions``), a lease extended under any
generation but its holder's (``stale_extensions``), and the rows checked against it (each end
the watch saw is one a row records).

``exercise_receipts`` closes and verifies a receipt of either exercise; the arithmetic of each
lives in a module of its own (this one for exercise 5, ``records`` for exercise 6), so that one
exercise's figures read top to bottom.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

ARMS = ("plain", "renewed", "bounded")
EPSILON = 1e-6  # seconds: two ends closer than this are one end read back (float rounding)


def count(items: Sequence[Any], test: Callable[[Any], bool]) -> int:
    """How many of ``items`` pass ``test``."""
    return sum(1 for item in items if test(item))


def figures(
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
            observations["detection"]["trials"], lease, interval, bound, scan, leases
        ),
        "hung": _hung(observations["hung"], lease, bound, settings["window_factor"], scan),
    }


def extensions(
    watched: Sequence[Sequence[float]],
    generation: int,
    start: float,
    after: float = -math.inf,
    until: float = math.inf,
) -> int:
    """How often the watch saw ``generation``'s lease end move past every end seen before it
    (``start``, the claim's end, to begin with), in reads begun within (``after``, ``until``]."""
    reached, found = start, 0
    for at, seen, expires in watched:
        if seen != generation:
            continue
        if after < at <= until and expires > reached + EPSILON:
            found += 1
        reached = max(reached, expires)
    return found


def progress_stopped(row: Mapping[str, Any]) -> float:
    """When a hung turn's progress last grew: its hang, or earlier when its last step outlasted
    the bound (a busy machine), since the bound counts from the renewer's last progress.

    The renewer records progress when it notices it (``progressed_at``, up to an interval after
    the step), so the earlier of the two records is the moment progress stopped."""
    return min(row["hung"]["hung_at"], last_progress(row))


def last_progress(row: Mapping[str, Any]) -> float:
    """When a hung turn's progress last grew, by its renewals; a renewer that never renewed
    shows none after the claim (the conditions then say what it failed to do)."""
    return max((r["progressed_at"] for r in row["renewals"]), default=row["hung"]["claimed_at"])


def stale_extensions(watched: Sequence[Sequence[float]], holder: int) -> int:
    """How often the watch saw the lease end of a generation other than ``holder`` move later.
    Every other generation is a replacement's claim, which sets its end once: a later end is a
    renewal that got past the fence."""
    reached: dict[int, float] = {}
    found = 0
    for _at, generation, expires in watched:
        if generation != holder and expires > reached.get(generation, expires) + EPSILON:
            found += 1
        reached[generation] = max(reached.get(generation, expires), expires)
    return found


def ends_unrecorded(row: Mapping[str, Any], generation: int, start: float) -> int:
    """Lease ends the watch saw ``generation`` extended to that none of its renewal rows
    records: a renewal done but not recorded, or rows that are not the renewals done."""
    recorded = {r["expires"] for r in row["renewals"] if r["generation"] == generation}
    return count(
        [end for _at, seen, end in row["watched"] if seen == generation and end > start + EPSILON],
        lambda end: end not in recorded,
    )


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
        "turns_longer_than_lease": count(rows, lambda row: row["turn_seconds"] > lease),
        "turns_longer_than_bound": count(rows, lambda row: row["turn_seconds"] > bound),
        "false_expiries": len(takeovers),
        "measured_share": len(takeovers) / len(rows),
        "worker_finishes_accepted": count(rows, lambda row: row["finish"] == "accepted"),
        "stale_completions_accepted": count(takeovers, lambda row: row["finish"] == "accepted"),
        "renewals": renewals,
        "renewals_per_held_second": renewals / held if held > 0 else 0.0,
        "refused_renewals": sum(count(row["attempts"], lambda a: not a["granted"]) for row in rows),
        "extended_trials_seen": count(rows, lambda row: _extended(row) > 0),
        "extensions_seen": sum(_extended(row) for row in rows),
        "stale_extensions_seen": _stale(rows),
        "ends_unrecorded": _unrecorded(rows),
    }


def _extended(row: Mapping[str, Any]) -> int:
    """How often the watch saw a trial's lease extended past its claim's end."""
    return extensions(row["watched"], row["generation"], row["expires"])


def _stale(rows: Sequence[Mapping[str, Any]]) -> int:
    return sum(stale_extensions(row["watched"], row["generation"]) for row in rows)


def _unrecorded(rows: Sequence[Mapping[str, Any]]) -> int:
    return sum(ends_unrecorded(row, row["generation"], row["expires"]) for row in rows)


def _renewed_detection(
    rows: Sequence[Mapping],
    lease: float,
    interval: float,
    safe: float,
    scan: float,
    leases: ModuleType,
) -> dict[str, Any]:
    """The renewed run's detection delay, beside the one a lease of ``safe`` seconds (the bound:
    the safe lease without renewal, by the receipt's own ``bound_factor``) would give."""
    delays = [row["takeover"]["took_at"] - row["killed_at"] for row in rows]
    measured = sum(delays) / len(delays)
    predicted = leases.detection_delay(lease, interval, scan)
    return {
        "lease": lease,
        "renew_interval": interval,
        "scan": scan,
        "trials": len(rows),
        "killed_mid_turn": count(rows, lambda row: "ended" not in row["turns"][-1]),
        "predicted_delay": predicted,
        "measured_mean_delay": measured,
        "difference": measured - predicted,
        "delays": delays,
        "safe_lease_without_renewal": safe,
        "predicted_delay_without_renewal": leases.detection_delay(safe, lease, scan),
        "stale_extensions_seen": _stale(rows),
        "ends_unrecorded": _unrecorded(rows),
    }


def _hung(
    hung: Mapping[str, Any], lease: float, bound: float, window_factor: float, scan: float
) -> dict[str, Any]:
    free, capped = hung["unbounded"], hung["bounded"]
    free_hung, capped_hung = free["hung"]["hung_at"], capped["hung"]["hung_at"]
    window_end = free["window_ended_at"]
    took = capped["takeover"]["took_at"]
    # each hung turn's generation and claimed end, as its worker recorded the claim
    free_claim, capped_claim = (
        (row["hung"]["generation"], row["hung"]["claimed_at"] + lease) for row in (free, capped)
    )
    capped_ends = [end for _at, g, end in capped["watched"] if g == capped_claim[0]]
    return {
        "unbounded": {
            "window": window_factor * bound,
            "taken_over_within_window": free["takeover_in_window"] is not None,
            "renewals_after_hang_within_window": count(
                free["renewals"], lambda row: free_hung < row["renewed_at"] <= window_end
            ),
            "lease_left_at_window_end": free["lease_expires_at_window_end"] - window_end,
            "refused_renewals": count(free["attempts"], lambda a: not a["granted"]),
            "took_after_kill": free["takeover"]["took_at"] - free["killed_at"],
            "extensions_after_hang_within_window_seen": extensions(
                free["watched"], *free_claim, after=free_hung, until=window_end
            ),
            "stale_extensions_seen": stale_extensions(free["watched"], free_claim[0]),
            "ends_unrecorded": ends_unrecorded(free, *free_claim),
        },
        "bounded": {
            "bound": bound,
            "renewals_after_hang": count(
                capped["renewals"], lambda row: row["renewed_at"] > capped_hung
            ),
            "refused_renewals": count(capped["attempts"], lambda a: not a["granted"]),
            "renewals_after_takeover": count(
                capped["renewals"], lambda row: row["renewed_at"] >= took
            ),
            "took_after_hang": took - capped_hung,
            "took_after_progress": took - last_progress(capped),
            "predicted_after_progress": bound + scan / 2,
            "extensions_after_hang_seen": extensions(
                capped["watched"], *capped_claim, after=progress_stopped(capped)
            ),
            "last_end_seen_after_takeover": max(capped_ends, default=capped_claim[1]) - took,
            "stale_extensions_seen": stale_extensions(capped["watched"], capped_claim[0]),
            "ends_unrecorded": ends_unrecorded(capped, *capped_claim),
        },
    }


def conditions(
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
        extended = recomputed[f"false_expiry.{arm}.extended_trials_seen"]
        yield (
            f"false_expiry.{arm}: "
            + ("no trial's lease was" if arm == "plain" else "every trial's lease was")
            + f" seen extended past its claim (saw {extended} of {len(rows)})",
            extended == (0 if arm == "plain" else len(rows)),
        )
        yield from _sound_record(f"false_expiry.{arm}", recomputed)
    detection = observations["detection"]["trials"]
    yield (
        f"detection: {settings['detection_trials']} trials",
        len(detection) == settings["detection_trials"],
    )
    yield (
        "detection: every takeover is by a later generation",
        all(row["takeover"]["generation"] > row["generation"] for row in detection),
    )
    yield from _sound_record("detection", recomputed)
    free, capped = observations["hung"]["unbounded"], observations["hung"]["bounded"]
    yield (
        "hung.unbounded: not taken over within the window (the renewer kept the lease alive)",
        not recomputed["hung.unbounded.taken_over_within_window"],
    )
    yield (
        "hung.unbounded: its lease was seen extended after the hang, within the window",
        recomputed["hung.unbounded.extensions_after_hang_within_window_seen"] > 0,
    )
    yield (
        "hung.bounded: taken over by a later generation",
        capped["takeover"]["generation"] > capped["hung"]["generation"],
    )
    yield (
        "hung.bounded: its lease was seen extended after its progress stopped, and no end seen"
        + " was past the takeover (it had run out)",
        recomputed["hung.bounded.extensions_after_hang_seen"] > 0
        and recomputed["hung.bounded.last_end_seen_after_takeover"] <= EPSILON,
    )
    for name in ("unbounded", "bounded"):
        yield from _sound_record(f"hung.{name}", recomputed)
    yield (
        "hung: both hung workers were taken over in the end",
        free["outcome"] is not None
        and capped["outcome"] is not None
        and free["outcome"]["generation"] == free["takeover"]["generation"]
        and capped["outcome"]["generation"] == capped["takeover"]["generation"],
    )


def _sound_record(where: str, recomputed: Mapping[str, Any]) -> Iterator[tuple[str, bool]]:
    """No lease the watch saw extended under a later generation than its holder's, and every
    end it saw the holder's lease extended to recorded by one of the holder's renewal rows."""
    stale, unrecorded = (
        recomputed[f"{where}.stale_extensions_seen"],
        recomputed[f"{where}.ends_unrecorded"],
    )
    yield f"{where}: no lease seen extended under a later generation (saw {stale})", stale == 0
    yield (
        f"{where}: every lease end seen is one a renewal row records ({unrecorded} not)",
        unrecorded == 0,
    )


def headline(figures: Mapping[str, Any]) -> list[str]:
    """The main figures of an exercise-5 receipt, one line each, for a terminal."""
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
