"""The sentences of the notebooks that talk about the kit's own measurements, written by code.

Prose typed by hand drifted when the receipts were re-measured: it called a count "not
surprising" that the table beside it put at P = 0.009, and gave a lease of "about 9.8 s" that
the receipt had as 8.3 s. So every sentence here that states a kit figure, or weighs one
("surprising", "slower", "a different shape"), is computed from the receipt it is about, with
the rule for each weighing stated in the code. Re-measure a receipt and the sentences follow.

The book's own figures (qwen2.5:0.5b through Ollama) are constants here: they are quoted from
the chapter, not measured by the kit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lucyshop.lab.lesson.inline import wrap

# The chapter's pilot (40 turns of qwen2.5:0.5b): median and slowest turn, in seconds.
BOOK_P50, BOOK_P100 = 0.539, 2.669
# A count whose two-sided binomial p-value is below this is called surprising.
SURPRISING = 0.05
# Trials whose median turn is at least this many times the pilot's are said to run slower.
SLOWER = 1.25
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
            " cap, the cap bounds the kit's tail: raise it and the tail, and the lease it"
            " needs, would grow."
        )
    else:
        lines.append(
            "The shapes are alike: both tails reach several times the median; the seconds differ"
            " with the model and the machine."
        )
    return lines


def binomial_readings(receipt: Mapping[str, Any]) -> list[str]:
    """Each rule's count of false expiries read against its two-sided binomial p-value."""
    lines = []
    for rule, row in _rules(receipt).items():
        k, n, p = row["false_expiries"], row["trials"], row["p_value"]
        if row["predicted_share"] == 0:
            reading = (
                "no pilot turn came near this lease, so none was expected"
                if k == 0
                else "a turn outlived a lease no pilot turn came near"
            )
        elif p < SURPRISING:
            reading = (
                f"surprising (p {p:.3f} < {SURPRISING}): the trials did not behave like the"
                " pilot the lease was chosen from"
            )
        else:
            reading = f"what chance does (p {p:.2f})"
        expected = row["expected_false_expiries"]
        lines.append(f"{rule}: {k} of {n} against {expected:g} expected: {reading}")
    return lines


def pilot_against_trials(receipt: Mapping[str, Any]) -> list[str]:
    """The pilot chose the leases; the trials met them. How alike they were, and what the
    difference cost, from the receipt's raw turns."""
    from lucyshop.lab.lesson.show import tail_shares

    times = receipt["figures"]["turn_times"]
    shares = tail_shares(receipt)
    (k1, n1), (k2, n2) = shares["pilot"], shares["trials"]
    ratio = times["trials_median"] / times["pilot_median"]
    p90 = _rules(receipt)["p90"]
    lines = [
        (
            f"median turn: pilot {times['pilot_median']:.2f} s,"
            f" trials {times['trials_median']:.2f} s ({ratio:.1f}x)"
        ),
        (
            f"turns longer than the median lease ({shares['lease']:.2f} s): pilot {k1} of {n1}"
            f" ({k1 / n1:.0%}), trials {k2} of {n2} ({k2 / n2:.0%})"
        ),
    ]
    if ratio >= SLOWER:
        lines.append(
            f"The trials ran slower than the pilot: about {ratio:.1f}x as long at the median."
            f" The p90 lease was a forecast from the pilot, to cut off about"
            f" {p90['expected_false_expiries']:g} of {p90['trials']}; against the slower trials"
            f" it cut off {p90['false_expiries']} of {p90['trials']}."
        )
    else:
        lines.append(
            f"The trials ran like the pilot (median ratio {ratio:.1f}x): the p90 lease cut off"
            f" {p90['false_expiries']} of {p90['trials']}, against about"
            f" {p90['expected_false_expiries']:g} forecast."
        )
    return lines


def stale_completions(receipt: Mapping[str, Any]) -> list[str]:
    """How many live workers lost their work over the three rules, and how many of their
    stale completions counted: printed after 13a's prediction of that count, not before."""
    stale = sum(row["stale_completions_accepted"] for row in _rules(receipt).values())
    taken = sum(row["false_expiries"] for row in _rules(receipt).values())
    return [
        f"Across all three rules {taken} live workers lost their work, and each tried its stale"
        f" completion; the fence accepted {stale} of them"
        + (": the misses cost redone work, never a wrong result." if stale == 0 else ".")
    ]


def say_all(lines: list[str]) -> None:
    for line in lines:
        _print(line)


def skew_by_role(receipt: Mapping[str, Any]) -> list[str]:
    """The skew trials on SQLite by who carried the shifted clock, and which way: the error
    each causes (false takeovers of live holders, late takeovers of dead ones), counted by
    the skew module's own rule for one trial."""
    from lucyshop.lab.skew import counts_of

    lines = []
    for role in ("holder", "taker"):
        for sign, word in ((-1, "behind"), (1, "ahead")):
            mine = [
                t
                for t in receipt["trials"]
                if t["store"] == "sqlite" and t["shifted"] == role and t["shift_leases"] * sign > 0
            ]
            live = [t for t in mine if t["fate"] == "live"]
            dead = [t for t in mine if t["fate"] == "dead"]
            false = sum(counts_of(t)["false_takeover"] for t in live)
            late = sum(counts_of(t)["late_takeover"] for t in dead)
            lines.append(
                f"SQLite, {role} {word:6}: live holders taken over {false} of {len(live)},"
                f" dead holders taken over late {late} of {len(dead)}"
            )
    return lines
