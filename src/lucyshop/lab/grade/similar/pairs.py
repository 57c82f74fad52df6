"""Who shares code with whom: every pair of students, and each student against earlier hand-ins
(``--archive DIR``) and the reference, for the chapter file and ``exercises.py`` alike.

A pair's similarity is the share of the smaller file's own fingerprints (``similarity``: the
starter code left out) found in the other, as JPlag's "maximum similarity" is: a student who
copied half a classmate's file into their own scores high even if the classmate wrote more.
A pair is flagged at the rubric's ``flag_at`` when it also shares at least ``MIN_SHARED``
fingerprints (about three functions' worth), so two files that differ from the stubs by one
short function, written the one obvious way, are not. The flag is for a person to look at
the side-by-side page (``pairs_html``); it never changes a score.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from lucyshop.lab.grade.similar import similarity
from lucyshop.lab.grade.submissions import CHAPTER, EXERCISES, Submission
from lucyshop.lab.loader import IMPLEMENTATIONS

MIN_SHARED = 40  # fingerprints; one short function gives about 16
LISTED = 0.3  # pairs at or above this are listed in the similarity report, flagged or not
CLASS, ARCHIVE, REFERENCE = "class", "archive", "reference"
Block = tuple[int, int, int, int]  # first and last line in a, first and last line in b


@dataclass(frozen=True)
class Entry:
    """One file compared: a student's, an earlier hand-in's or the reference's."""

    name: str  # the student, "archive: <path>" or "reference"
    kind: str  # CHAPTER or EXERCISES
    source: str = field(repr=False)
    origin: str = CLASS


@dataclass(frozen=True)
class Pair:
    a: Entry
    b: Entry
    mode: str  # similarity.AST or similarity.TEXT
    shared: int
    share_a: float  # of a's own fingerprints, found in b
    share_b: float

    @property
    def similarity(self) -> float:
        return max(self.share_a, self.share_b)

    def flagged(self, flag_at: float) -> bool:
        return self.similarity >= flag_at and self.shared >= MIN_SHARED

    @cached_property
    def blocks(self) -> tuple[Block, ...]:
        """Where the shared code is, on each side: worked out only for the pairs shown."""
        mine = similarity.own(self.a.source, self.mode)
        theirs = similarity.own(self.b.source, self.mode)
        spans = [(*mine[h], *theirs[h]) for h in mine.keys() & theirs.keys()]
        if self.mode == similarity.TEXT:
            return merge(spans)
        return by_region(
            spans, similarity.regions(self.a.source), similarity.regions(self.b.source)
        )


def class_entries(submissions: Iterable[Submission]) -> list[Entry]:
    """Each student's chapter file and ``exercises.py``, as handed in."""
    found = []
    for submission in submissions:
        for kind, path in ((CHAPTER, submission.chapter), (EXERCISES, submission.exercises)):
            if path is not None and path.is_file():
                text = path.read_bytes().decode("utf-8", "replace")
                found.append(Entry(submission.student, kind, text))
    return found


def archive_entries(directory: Path) -> list[Entry]:
    """Every ``.py`` under ``directory``: each ``exercises.py`` as exercises, others as chapters."""
    if not directory.is_dir():
        raise ValueError(f"no archive directory at {directory}")
    return [
        Entry(
            f"archive: {path.relative_to(directory).as_posix()}",
            EXERCISES if path.name == EXERCISES else CHAPTER,
            path.read_bytes().decode("utf-8", "replace"),
            ARCHIVE,
        )
        for path in sorted(directory.rglob("*.py"))
        if path.is_file()
    ]


def reference_entries() -> list[Entry]:
    solutions = IMPLEMENTATIONS["solutions"].parent
    return [
        Entry(REFERENCE, kind, (solutions / kind).read_text(encoding="utf-8"), REFERENCE)
        for kind in (CHAPTER, EXERCISES)
    ]


def compare(a: Entry, b: Entry) -> Pair:
    """How much ``a`` and ``b`` share, and where (the line ranges of each shared run)."""
    mode = similarity.mode_for(
        similarity.fingerprinted(a.source), similarity.fingerprinted(b.source)
    )
    mine, theirs = similarity.own(a.source, mode), similarity.own(b.source, mode)
    shared = mine.keys() & theirs.keys()
    return Pair(a, b, mode, len(shared), _share(shared, mine), _share(shared, theirs))


def _share(shared: set[int], prints: similarity.Prints) -> float:
    return round(len(shared) / len(prints), 3) if prints else 0.0


def by_region(
    spans: Iterable[Block],
    left: tuple[similarity.Span, ...],
    right: tuple[similarity.Span, ...],
) -> tuple[Block, ...]:
    """Matches grouped by the function (or statement) they start in, on each side: a block
    is "this part of a's ``claim`` is in b's ``take``", clipped to those two functions."""
    groups: dict[tuple[similarity.Span | None, similarity.Span | None], list[Block]] = {}
    for span in spans:
        where = (similarity.region_of(left, span[0]), similarity.region_of(right, span[2]))
        groups.setdefault(where, []).append(span)
    blocks = []
    for (a_region, b_region), found in groups.items():
        a_lo, a_hi = min(s[0] for s in found), max(s[1] for s in found)
        b_lo, b_hi = min(s[2] for s in found), max(s[3] for s in found)
        if a_region is not None:
            a_hi = min(a_hi, a_region[1])
        if b_region is not None:
            b_hi = min(b_hi, b_region[1])
        blocks.append((a_lo, a_hi, b_lo, b_hi))
    return tuple(sorted(blocks))


def merge(spans: Iterable[Block]) -> tuple[Block, ...]:
    """Overlapping or touching matches (in both files at once) as one block each."""
    blocks: list[list[int]] = []
    for a_lo, a_hi, b_lo, b_hi in sorted(spans):
        last = blocks[-1] if blocks else None
        if last and a_lo <= last[1] + 1 and b_lo <= last[3] + 1 and b_hi >= last[2] - 1:
            last[1], last[2], last[3] = max(last[1], a_hi), min(last[2], b_lo), max(last[3], b_hi)
        else:
            blocks.append([a_lo, a_hi, b_lo, b_hi])
    return tuple((a_lo, a_hi, b_lo, b_hi) for a_lo, a_hi, b_lo, b_hi in blocks)


def across(students: Sequence[Entry], others: Sequence[Entry] = ()) -> list[Pair]:
    """Every student against every other and against ``others``, most similar first."""
    pairs = [
        compare(a, b) for i, a in enumerate(students) for b in students[i + 1 :] if a.kind == b.kind
    ]
    pairs += [compare(a, b) for a in students for b in others if a.kind == b.kind]
    return sorted(pairs, key=lambda p: (-p.similarity, -p.shared, p.a.name, p.b.name, p.a.kind))


def listed(pairs: Iterable[Pair], flag_at: float) -> list[Pair]:
    """The pairs worth a look: flagged, or at least ``LISTED`` similar."""
    return [p for p in pairs if p.flagged(flag_at) or (p.similarity >= LISTED and p.shared)]


def closest(pairs: Iterable[Pair], student: str) -> Pair | None:
    """The pair of ``student`` with the most similar classmate or earlier hand-in, if any
    shares anything."""
    mine = [
        p
        for p in pairs
        if p.shared
        and student in (p.a.name, p.b.name)
        and REFERENCE not in (p.a.origin, p.b.origin)
    ]
    return mine[0] if mine else None  # ``pairs`` are ranked


def other(pair: Pair, student: str) -> Entry:
    return pair.b if pair.a.name == student else pair.a


CSV_HEADER = [
    "rank", "file", "a", "b", "similarity", "a_share", "b_share", "shared", "form", "flagged",
    "a_lines", "b_lines",
]  # fmt: skip


def csv_rows(pairs: Sequence[Pair], flag_at: float) -> list[list[str]]:
    """One row per listed pair; line ranges as ``12..40 55..60`` (never read as a date)."""
    return [
        [
            str(rank),
            pair.a.kind,
            pair.a.name,
            pair.b.name,
            f"{pair.similarity:.3f}",
            f"{pair.share_a:.3f}",
            f"{pair.share_b:.3f}",
            str(pair.shared),
            pair.mode,
            "yes" if pair.flagged(flag_at) else "",
            " ".join(f"{lo}..{hi}" for lo, hi, _b_lo, _b_hi in pair.blocks),
            " ".join(f"{lo}..{hi}" for _a_lo, _a_hi, lo, hi in pair.blocks),
        ]
        for rank, pair in enumerate(pairs, start=1)
    ]
