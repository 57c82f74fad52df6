"""``similarity.html``: the ranked pairs, and each pair's matching lines side by side.

One self-contained page (no script, no fetch: it opens from the file system), as MOSS, JPlag
and Dolos give: a ranked table, then for each of the first ``SHOWN`` pairs its matching blocks,
the lines of one file beside the lines of the other, numbered as in the files handed in.
Everything a student wrote is escaped: a hand-in is text, never markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from lucyshop.lab.grade.similar.pairs import MIN_SHARED, Pair

SHOWN = 60  # pairs drawn side by side
BLOCKS = 25  # blocks of one pair
BLOCK_LINES = 150  # lines of one block, each side

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; }
table.rank { border-collapse: collapse; }
table.rank td, table.rank th { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
tr.flagged td { background: #fde2e2; }
table.side { border-collapse: collapse; width: 100%; table-layout: fixed; margin-bottom: 1em; }
table.side td { vertical-align: top; border: 1px solid #ddd; width: 50%; }
pre { margin: 0; padding: 0.3em; font-size: 12px; overflow-x: auto; background: #fffbe6; }
span.n { color: #888; user-select: none; }
"""


def page(pairs: Sequence[Pair], sources: dict[tuple[str, str], str], flag_at: float) -> str:
    """The whole page; ``sources`` maps (name, file kind) to the text of that file."""
    flagged = sum(p.flagged(flag_at) for p in pairs)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>Chapter 13: similarity across the class</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>Similarity across the class</h1>",
        (
            f"<p>{len(pairs)} pairs listed, {flagged} flagged (similarity at least {flag_at:g}"
            f" and at least {MIN_SHARED} shared fingerprints). Similarity is the share of the"
            " smaller file's own code (starter code left out) found in the other, once names,"
            " literals, comments and layout are normalised away. A flag asks a person to"
            " compare; it never changes a score.</p>"
        ),
        _table(pairs, flag_at),
    ]
    for number, pair in enumerate(pairs[:SHOWN], start=1):
        parts.append(_side_by_side(number, pair, sources, flag_at))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _table(pairs: Sequence[Pair], flag_at: float) -> str:
    head = ("#", "file", "a", "b", "similarity", "shared", "form", "flagged")
    rows = ["<table class='rank'><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for number, pair in enumerate(pairs, start=1):
        mark = pair.flagged(flag_at)
        name = f"<a href='#pair-{number}'>{number}</a>" if number <= SHOWN else str(number)
        rows.append(
            f"<tr class='{'flagged' if mark else ''}'><td>{name}</td>"
            f"<td>{escape(pair.a.kind)}</td><td>{escape(pair.a.name)}</td>"
            f"<td>{escape(pair.b.name)}</td><td>{pair.similarity:.3f}</td>"
            f"<td>{pair.shared}</td><td>{pair.mode}</td><td>{'yes' if mark else ''}</td></tr>"
        )
    rows.append("</table>")
    return "\n".join(rows)


def _side_by_side(
    number: int, pair: Pair, sources: dict[tuple[str, str], str], flag_at: float
) -> str:
    left = sources.get((pair.a.name, pair.a.kind), "").splitlines()
    right = sources.get((pair.b.name, pair.b.kind), "").splitlines()
    title = (
        f"{number}. {escape(pair.a.name)} and {escape(pair.b.name)}: {escape(pair.a.kind)},"
        f" similarity {pair.similarity:.3f}{' (flagged)' if pair.flagged(flag_at) else ''}"
    )
    parts = [f"<h2 id='pair-{number}'>{title}</h2>"]
    parts.append(
        f"<p>{pair.share_a:.0%} of {escape(pair.a.name)}'s own code is in"
        f" {escape(pair.b.name)}'s; {pair.share_b:.0%} the other way. {len(pair.blocks)}"
        f" matching blocks{f', the first {BLOCKS} shown' if len(pair.blocks) > BLOCKS else ''}"
        f" (compared as {pair.mode}).</p>"
    )
    parts.append("<table class='side'>")
    parts.append(f"<tr><th>{escape(pair.a.name)}</th><th>{escape(pair.b.name)}</th></tr>")
    for a_lo, a_hi, b_lo, b_hi in pair.blocks[:BLOCKS]:
        parts.append(
            f"<tr><td>{_lines(left, a_lo, a_hi)}</td><td>{_lines(right, b_lo, b_hi)}</td></tr>"
        )
    parts.append("</table>")
    return "\n".join(parts)


def _lines(text: list[str], first: int, last: int) -> str:
    """Lines ``first``-``last`` (1-based) of ``text``, numbered and escaped."""
    shown = range(first, min(last, first + BLOCK_LINES - 1) + 1)
    body = "\n".join(
        f"<span class='n'>{n:>4}</span>  {escape(text[n - 1]) if n <= len(text) else ''}"
        for n in shown
    )
    more = f"\n<span class='n'>... {last - shown[-1]} more lines</span>" if last > shown[-1] else ""
    return f"<pre>{body}{more}</pre>"
