"""The sentences of the notebooks that talk about the kit's own measurements, written by code.

Prose typed by hand drifted when the receipts were re-measured: it called a count "not
surprising" that the table beside it put at P = 0.009, and gave a lease of "about 9.8 s" that
the receipt had as 8.3 s. So every sentence here that states a kit figure, or weighs one
("surprising", "more capped", "a different shape"), is computed from the receipt it is about, with
the rule for each weighing stated in the code. Re-measure a receipt and the sentences follow.

The book's own figures (qwen2.5:0.5b through Ollama) are constants here: they are quoted from
the chapter, not measured by the kit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lucyshop.lab.experiment.receipt import DRIFT
from lucyshop.lab.lesson.inline import wrap

# The chapter's pilot (40 turns of qwen2.5:0.5b): median and slowest turn, in seconds.
BOOK_P50, BOOK_P100 = 0.539, 2.669
# A count whose two-sided binomial p-value is below this is called surprising.
SURPRISING = 0.05
# A kit tail ratio (slowest / median) below this share of the book's is a different shape.
SHAPE = 0.75


def _print(text: str) -> None:
    print(wrap(text))


def _rules(receipt: Mapping[str, Any]) -> Mapping[str, Any]:
    return receipt["figures"]["false_expiry"]


def tail_shape(receipt: Mapping[str, Any]) -> list[str]:
    """The kit's tail against the book's: slowest over median, and the turns the cap stopped."""
    pilot = receipt["figures"]["pilot"]
    turns = receipt["observations"]["pilot"]
    cap = receipt["settings"]["max_tokens"]
    capped = sum(turn["tokens"] >= cap for turn in turns)
    kit, book = pilot["p100"] / pilot["p50"], BOOK_P100 / BOOK_P50
    lines = [
        (
            f"slowest / median pilot turn: kit {kit:.1f}x ({pilot['p100']:.2f} s / "
            f"{pilot['p50']:.2f} s); book {book:.1f}x ({BOOK_P100} s / {BOOK_P50} s)"
        ),
        f"kit pilot turns stopped by the {cap}-token cap: {capped} of {len(turns)}",
    ]
    if kit < SHAPE * book:
        lines.append(
            "So the shapes differ, not only the seconds: the kit's slowest turn is much closer to"
            f" its median than the book's. With {capped} of {len(turns)} turns stopped at the"
            " cap, the cap shapes the kit's tail, but it bounds tokens, not seconds: how long"
            " those tokens take still has to be measured, and raising the cap would lengthen"
            " the tail and the lease it needs."
        )
    else:
        lines.append(
            "The shapes are alike: both tails reach several times the median; the seconds differ"
            " with the model and the machine."
        )
    return lines


def binomial_readings(receipt: Mapping[str, Any]) -> list[str]:
    """Each rule's count of false expiries read against the forecast the pilot made, with what
    the trials could have told at all: the pilot's share is itself a sample, so the range of
    counts to expect carries its uncertainty (beta-binomial), and 0 of n bounds a share only
    by the rule of three."""
    lines = []
    for rule, row in _rules(receipt).items():
        k, n = row["false_expiries"], row["trials"]
        low, high = row["pilot_share_interval"]
        spread = row["with_pilot_uncertainty"]
        first, last = spread["range"]
        said = (
            f"{rule}: {k} of {n} trials outlived a lease the pilot put"
            f" {row['predicted_share']:.0%} of turns beyond (95% interval {low:.0%} to"
            f" {high:.0%}). Taken as exact, that share lets a test flag"
            f" {_counts(row['flaggable_counts'])} of {n}; carried with its uncertainty, it"
            f" expects {first} to {last} in at least 95 runs of 100"
        )
        if k == 0 and row["predicted_share"] == 0:
            reading = (
                f"none was seen, so the share is below {row['upper_bound_if_none']:.1%} with"
                f" about 95% confidence (the rule of three); {n} trials cannot tell a share of"
                " 0 from one just under that"
            )
        elif spread["p_value"] < SURPRISING:
            reading = (
                f"{k} is outside that (p {spread['p_value']:.3f} with that uncertainty): the"
                " trials did not behave like the pilot the lease was chosen from"
            )
        else:
            reading = (
                f"{k} is inside it (p {spread['p_value']:.2f} with that uncertainty): consistent"
                f" with the forecast, and once the pilot's uncertainty is carried, {n} trials"
                f" could not have flagged any count in {first} to {last}"
            )
        lines.append(f"{said}. {reading[0].upper()}{reading[1:]}.")
    return lines


def _counts(flagged: list[int]) -> str:
    """Counts as runs: [0, 1, 2, 9, 10] is '0-2 or 9-10'; none is 'no count'."""
    if not flagged:
        return "no count"
    runs: list[list[int]] = []
    for count in flagged:
        if runs and count == runs[-1][1] + 1:
            runs[-1][1] = count
        else:
            runs.append([count, count])
    return " or ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def _weigh(p: float, more: str, fewer: str, first: float, second: float) -> str:
    """A verdict only where the test gives one: ``more`` or ``fewer`` (by which side is larger)
    at p below ``SURPRISING``, else that the two cannot be told apart."""
    if p >= SURPRISING:
        return f"no difference these samples can tell (p {p:.2f})"
    return f"{more if second > first else fewer} (p {p:.3f})"


def pilot_against_trials(receipt: Mapping[str, Any]) -> list[str]:
    """The pilot chose the leases; the trials met them. The two are one measurement (the
    seconds of one model call), so they are compared turn for turn: by rank, by the share
    past each lease, by length (the share the token cap stopped) and by speed (seconds per
    token on the capped turns). Each verdict is the test's, at p below ``SURPRISING``;
    medians are nearest-rank, a turn that happened."""
    times = receipt["figures"]["turn_times"]
    test = times["mann_whitney"]
    pilot, trials = times["pilot_median"], times["trials_median"]
    # U counts the pairs in which a pilot turn is the longer: above half, the pilot ran longer
    ahead = test["u"] - test["n1"] * test["n2"] / 2
    by_rank = _weigh(
        test["p_value"], "the trials ran longer", "the trials ran shorter", ahead, -ahead
    )
    lines = [
        (
            f"median turn (nearest rank): pilot {pilot:.2f} s, trials {trials:.2f} s; by rank"
            f" (Mann-Whitney), {by_rank}"
        )
    ]
    for rule, row in times["past_lease"].items():
        (k1, n1), (k2, n2) = row["pilot"], row["trials"]
        lines.append(
            f"turns past the {rule} lease ({row['lease']:.2f} s): pilot {k1} of {n1}, trials"
            f" {k2} of {n2}; Fisher's exact test: "
            + _weigh(row["fisher_p"], "more in the trials", "fewer in the trials", k1 / n1, k2 / n2)
        )
    capped = times["capped"]
    (k1, n1), (k2, n2) = capped["pilot"], capped["trials"]
    cap = receipt["settings"]["max_tokens"]
    lines.append(
        f"length: turns stopped by the {cap}-token cap, pilot {k1} of {n1}, trials {k2} of"
        f" {n2}; "
        + _weigh(
            capped["fisher_p"],
            "more capped in the trials",
            "fewer capped in the trials",
            k1 / n1,
            k2 / n2,
        )
    )
    speed = times["seconds_per_token"]
    if speed["mann_whitney_p"] is None:
        lines.append("speed: too few capped turns on a side to compare seconds per token")
    else:
        first, second = speed["pilot_median"], speed["trials_median"]
        lines.append(
            f"speed: seconds per token on capped turns, pilot {first * 1000:.1f} ms, trials"
            f" {second * 1000:.1f} ms (medians); Mann-Whitney: "
            + _weigh(
                speed["mann_whitney_p"],
                "slower per token in the trials",
                "faster per token in the trials",
                first,
                second,
            )
        )
    if speed.get("drift") is not None:
        lines.append(
            f"drift: seconds per token on capped turns moved {speed['drift']:+.0%} from the"
            " pilot to its repeat after the trials (the receipt's verify fails a move beyond"
            f" {DRIFT:.0%} either way)"
        )
    lines.append(_cap_in_seconds(receipt))
    return lines


def _cap_in_seconds(receipt: Mapping[str, Any]) -> str:
    """The chapter's point, from this run: the cap bounds tokens, not seconds."""
    cap = receipt["settings"]["max_tokens"]
    observed = receipt["observations"]
    seconds = [t["seconds"] for t in observed["pilot"] if t["tokens"] >= cap] + [
        row["turn_seconds"]
        for phase in observed["false_expiry"].values()
        for row in phase["trials"]
        if row["tokens"] >= cap
    ]
    if not seconds:
        return f"No turn reached the {cap}-token cap, so the cap bounded nothing here."
    return (
        f"The cap bounds tokens, not seconds: the {len(seconds)} turns it stopped took"
        f" {min(seconds):.2f} to {max(seconds):.2f} s. A lease still has to come from turns"
        " measured on the machine that runs them."
    )


def stale_completions(receipt: Mapping[str, Any]) -> list[str]:
    """How many live workers lost their work over the three rules, and how many of their
    stale completions counted: printed after 13a's prediction of that count, not before, and
    followed by ``fence_readings``, which credits the generation (or not)."""
    stale = sum(row["stale_completions_accepted"] for row in _rules(receipt).values())
    taken = sum(row["false_expiries"] for row in _rules(receipt).values())
    said = (
        f"Across all three rules {taken} live workers lost their work, and each tried its stale"
        f" completion; the fence accepted {stale} of them. Whether the generation decided is"
        " the negative control's question:"
    )
    return [said]


def fence_readings(receipt: Mapping[str, Any]) -> list[str]:
    """Which comparison refused each stale write, and what the same trials did without the
    generation comparison: the fence is credited only where the generation decided."""
    lines = []
    for name, what in (("fence", "the reference"), ("control", "the copy without the generation")):
        row = receipt["figures"][name]
        refused = ", ".join(f"{n} by the {k} comparison" for k, n in row["refused_by"].items())
        lines.append(
            f"{what}: {row['stale_writes']} stale writes in {row['taken_over']} takeovers,"
            f" {row['while_next_generation_held']} of them while generation + 1 held the work"
            f" under the same owner label; accepted {row['accepted']}"
            + (f", refused {refused}" if refused else "")
        )
    fenced, control = receipt["figures"]["fence"], receipt["figures"]["control"]
    decided = fenced["refused_by"].get("generation", 0)
    if fenced["stale_writes"] and decided == fenced["stale_writes"] and control["accepted"]:
        lines.append(
            "Only the generation told the stale holder from the current one, and without it"
            f" {control['accepted']} of {control['stale_writes']} stale writes went through."
        )
    else:
        lines.append(
            "These runs do not show the generation deciding: a refusal counts for it only"
            " when generation + 1 held the work and the copy without it accepted the same write."
        )
    return lines


def say_all(lines: list[str]) -> None:
    for line in lines:
        _print(line)


STORES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
Row = tuple[str, str, float, str, str]  # store, arm, shift in leases, shifted role, fate


def skew_rows(receipt: Mapping[str, Any]) -> dict[Row, Mapping[str, Any]]:
    """The skew receipt's summary rows as they are, never pooled, keyed by the skew module's
    ``cell`` split into its parts."""
    rows = {}
    for name, row in receipt["summary"].items():
        store, arm, shift, role, fate = name.split()
        rows[store, arm, float(shift), role, fate] = row
    return rows


def _of(row: Mapping[str, Any], count: str) -> str:
    return f"{row[count]} of {row['trials']}"


def skew_table(receipt: Mapping[str, Any]) -> tuple[list[tuple[str, ...]], list[str]]:
    """The fenced live and dead trials, one line per store, shifted role and shift: live
    holders taken over, dead ones taken over late, and the takeovers of each that came early
    (before three quarters of the lease, by the clock every process shares)."""
    rows = skew_rows(receipt)
    lines = []
    for store, arm, shift, role, fate in sorted(rows, key=lambda key: (key[0] != "sqlite", key)):
        if arm != "fenced" or fate != "live":
            continue
        live, dead = rows[store, arm, shift, role, "live"], rows[store, arm, shift, role, "dead"]
        taken = (_of(live, "false_takeover"), _of(live, "early_takeover"))
        late = (_of(dead, "late_takeover"), _of(dead, "early_takeover"))
        lines.append((store, role, f"{shift:+g}", *taken, *late))
    return lines, ["store", "shifted", "shift", "live taken", "early", "dead late", "early"]


def skew_by_role(receipt: Mapping[str, Any]) -> list[str]:
    """On SQLite, per shifted role and direction, each shift's counts in turn: the dose at
    which a skewed clock starts to take live holders' work, or to keep dead holders' work
    waiting."""
    rows = {k[2:]: v for k, v in skew_rows(receipt).items() if k[:2] == ("sqlite", "fenced")}
    lines = []
    for role in ("holder", "taker"):
        shifts = sorted({shift for shift, mine, _ in rows if mine == role}, key=abs)
        for sign, word in ((-1, "behind"), (1, "ahead")):
            dose = [shift for shift in shifts if shift * sign > 0]
            live = ", ".join(
                f"{_of(rows[s, role, 'live'], 'false_takeover')} at {s:+g}" for s in dose
            )
            late = ", ".join(
                f"{_of(rows[s, role, 'dead'], 'late_takeover')} at {s:+g}" for s in dose
            )
            lines.append(
                f"SQLite, {role} {word}: live holders taken over {live}; dead holders taken"
                f" over late {late}"
            )
    return lines


def _writes(trial: Mapping[str, Any]) -> str:
    """A holder's writes: when, after its claim, and accepted or which comparison refused it."""
    from lucyshop.lab.experiment.control import comparison

    return "; ".join(
        f"{w['write']} at {w['started'] - trial['holder_claimed']:.2f} s "
        + ("accepted" if w["accepted"] else f"refused by the {comparison(w['why'])} comparison")
        for w in trial["holder_writes"]
    )


def pg_takeovers(receipt: Mapping[str, Any]) -> list[str]:
    """PostgreSQL's side of the skew receipt: early takeovers per row (the clock's error), and
    each live holder taken over anyway: when, against its lease, and what became of its writes
    (a loaded machine can keep a live holder past its lease)."""
    lease = receipt["parameters"]["lease_seconds"]
    rows = {k: v for k, v in skew_rows(receipt).items() if k[:2] == ("postgres", "fenced")}
    early = sum(bool(row["early_takeover"]) for row in rows.values())
    *others, last = sorted({key[4] for key in rows})
    fates = f"{', '.join(others)} and {last}" if others else last
    shown = f"{early} of {len(rows)} (every shift and shifted role; {fates} holders)"
    lines = [f"PostgreSQL: rows with an early takeover, {shown}"]
    for trial in receipt["trials"]:
        where = (trial["store"], trial["arm"], trial["fate"])
        if where != ("postgres", "fenced", "live") or trial["taken_after"] is None:
            continue
        after = trial["taken_after"]
        lines.append(
            f"PostgreSQL, {trial['shifted']}'s clock {trial['shift_leases']:+g}: a live holder"
            f" taken over {after:.2f} s after its claim, {after / lease:.2f} leases of"
            f" {lease:g} s ({'after' if after > lease else 'before'} its lease ended); its"
            f" writes: {_writes(trial)}"
        )
    return lines


def skew_fence(receipt: Mapping[str, Any]) -> list[str]:
    """Every skew row in which a holder could write after its takeover, the slow trials with
    and without the generation comparison side by side: the generation is credited only
    where it refused every stale write and the control accepted the same writes."""
    rows = skew_rows(receipt)
    lines = []
    for (store, arm, shift, role, fate), row in sorted(
        rows.items(), key=lambda item: (item[0][0] != "sqlite", item[0][4] != "slow", item[0])
    ):
        if not row["could_write_stale"]:
            continue
        what = "the chapter's fence" if arm == "fenced" else "without the generation"
        clock = "no clock shifted" if role == "none" else f"{role}'s clock {shift:+g}"
        refused = ", ".join(f"{n} by the {k}" for k, n in row["refused_by"].items())
        lines.append(
            f"{STORES[store]}, {fate} holder, {clock}, {what}: taken over in"
            f" {_of(row, 'could_write_stale')} trials, {row['stale_writes']} stale writes,"
            f" accepted {row['stale_accepted']}" + (f", refused {refused}" if refused else "")
        )
    fenced = [row for key, row in rows.items() if key[1] == "fenced"]
    control = [row for key, row in rows.items() if key[1] == "control"]
    decided = all(row["refused_by"].get("generation", 0) == row["stale_writes"] for row in fenced)
    if (
        decided
        and any(row["stale_writes"] for row in fenced)
        and control
        and all(row["stale_accepted"] == row["stale_writes"] > 0 for row in control)
    ):
        lines.append(
            "Holder and taker claimed under one owner label, so only the generation told them"
            " apart: it refused every stale write the fence saw, and without it every stale"
            " write of the slow trials was accepted."
        )
    else:
        lines.append(
            "These trials do not show the generation deciding: it counts only where it refused"
            " every stale write and the copy without it accepted the same ones."
        )
    return lines
