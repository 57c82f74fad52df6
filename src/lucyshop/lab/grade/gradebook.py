"""The class's files, assembled from the kept results once every check is gone.

``grades.csv``: one row per student. Every count is a number in a column of its own
(``claim_passed``, ``claim_total``), never ``9/9``, which a spreadsheet reads as a date; the
row's status (PASSING, NOT STARTED, ...) is a column beside them. ``id`` and ``email`` come
from the roster when one is given. ``--bom`` starts each CSV file with a UTF-8 byte-order
mark, which Excel needs to read accents.

The roster (``--roster FILE``, ``make grade ROSTER=roster.csv``) is a CSV file with a header;
``folder`` is required (the hand-in's folder, or its file name without ``.py``; matched
ignoring case), and ``name``, ``id``, ``sis_user_id``, ``sis_login_id``, ``email`` and
``section`` are optional. With it, ``canvas.csv`` is written in the shape of Canvas's gradebook
import: Student, ID, SIS User ID, SIS Login ID, Section, then the assignment's column, a
Points Possible row, and one row per roster student (empty score: no hand-in).

Also here: ``similarity.csv`` and ``similarity.html``, the pairs across the class (``pairs``).
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lucyshop.atomic import write_text
from lucyshop.lab.check.results import printable
from lucyshop.lab.check.subjects import EXERCISES, FUNCTIONS
from lucyshop.lab.grade.feedback import checkpoint_label
from lucyshop.lab.grade.rubric import CHECKPOINT_CASES, Rubric
from lucyshop.lab.grade.similar import pairs, pairs_html, similarity
from lucyshop.lab.grade.store import Graded
from lucyshop.lab.statuses import CheckpointStatus, VerdictStatus

if TYPE_CHECKING:
    from lucyshop.lab.grade.classroom import Options

ASSIGNMENT = "Chapter 13"
LABELS = [*FUNCTIONS, *(row.label for row in EXERCISES)]


def column(label: str) -> str:
    """``exercise 1`` -> ``exercise_1``: a column name without spaces."""
    return label.replace(" ", "_")


COLUMNS = (
    ["student", "id", "email", "status", "score", "max_score"]
    + ["similarity", "flagged", "closest", "closest_similarity"]
    + [
        name
        for label in LABELS
        for name in (label, f"{column(label)}_passed", f"{column(label)}_total")
    ]
    + ["checkpoint", "checkpoint_passed", "checkpoint_total", "seconds", "message"]
)


@dataclass(frozen=True)
class Student:
    """One roster line."""

    folder: str
    name: str = ""
    id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    email: str = ""
    section: str = ""


ROSTER_FIELDS = ("folder", "name", "id", "sis_user_id", "sis_login_id", "email", "section")


def matching(name: str) -> str:
    """How a folder is matched to a roster line: Unicode-normalised, case ignored."""
    return unicodedata.normalize("NFC", name).strip().casefold()


def load_roster(path: Path) -> dict[str, Student]:
    """The roster by folder; ValueError names the first thing wrong with it."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's BOM is fine
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read the roster {path}: {error}") from None
    reader = csv.DictReader(io.StringIO(text))
    header = {
        (h or "").strip().lower().replace(" ", "_").replace("-", "_"): h
        for h in reader.fieldnames or []
    }
    if "folder" not in header:
        raise ValueError(f"the roster {path} needs a 'folder' column (it has: {', '.join(header)})")
    roster: dict[str, Student] = {}
    for number, line in enumerate(reader, start=2):
        values = {f: (line.get(header[f]) or "").strip() for f in ROSTER_FIELDS if f in header}
        if not values["folder"]:
            continue
        if matching(values["folder"]) in roster:
            raise ValueError(f"the roster {path} names {values['folder']!r} twice (line {number})")
        roster[matching(values["folder"])] = Student(**values)
    return roster


FORMULA = ("=", "+", "-", "@", "\t", "\r")  # how a cell a spreadsheet would run begins


def cell(value: object) -> str:
    """``value`` as a CSV cell that a spreadsheet shows and never runs: control characters
    escaped, and text that begins like a formula (``=HYPERLINK(...)``, ``+``, ``-``, ``@``)
    quoted with a leading ``'``, as spreadsheets themselves do. A number stays a number."""
    text = str(value)
    if text.startswith(FORMULA) and not _number(text):
        text = "'" + text
    return printable(text)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip() == text


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, bom: bool = False) -> str:
    """A CSV file's text (``\r\n`` lines, every cell through ``cell``)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([cell(name) for name in header])
    writer.writerows([cell(value) for value in row] for row in rows)
    return ("\ufeff" if bom else "") + buffer.getvalue()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, text, durable=True)


def hidden_in(item: Graded) -> list[str]:
    """What of ``similarity.HIDING`` the student's chapter file uses (``hiding``)."""
    chapter = item.submission.chapter
    if chapter is None or not chapter.is_file():
        return []
    return similarity.hiding(chapter.read_bytes().decode("utf-8", "replace"))


def flag_reason(item: Graded) -> str:
    """Why a person should look at ``item``: code hidden as data, else its similarity."""
    hidden = hidden_in(item)
    if hidden:
        return f"it hides code as data ({', '.join(hidden)}): read what it runs"
    return "compare with the reference"


def gradebook_row(
    item: Graded, rubric: Rubric, student: Student | None, near: pairs.Pair | None, flagged: bool
) -> dict[str, str]:
    """One gradebook row; every count a number."""
    verdict = item.verdict
    checked = verdict.status == VerdictStatus.CHECKED
    ran = checked and verdict.checkpoint != CheckpointStatus.SKIPPED
    row = {
        "student": item.submission.student,
        "id": student.id if student else "",
        "email": student.email if student else "",
        "status": verdict.status,
        "score": f"{item.score.points:g}",
        "max_score": f"{rubric.total:g}",
        "similarity": "" if item.similarity is None else f"{item.similarity:.3f}",
        "flagged": "; ".join(["yes", *hidden_in(item)]) if flagged else "",
        "closest": pairs.other(near, item.submission.student).name if near else "",
        "closest_similarity": f"{near.similarity:.3f}" if near else "",
        "checkpoint": checkpoint_label(verdict),
        "checkpoint_passed": str(sum(c.passed for c in verdict.cases)) if ran else "",
        "checkpoint_total": str(max(len(verdict.cases), CHECKPOINT_CASES)) if ran else "",
        "seconds": f"{verdict.seconds:.0f}",
        "message": verdict.error,
    }
    for found in verdict.rows:
        row[found.label] = found.status
        row[f"{column(found.label)}_passed"] = str(found.passed)
        row[f"{column(found.label)}_total"] = str(found.total)
    return row


def write_class(
    graded: Sequence[Graded],
    out: Path,
    rubric: Rubric,
    options: Options,
    say: Callable[[str], None] = print,
) -> None:
    """``grades.csv``, the similarity report and, with a roster, ``canvas.csv``."""
    roster = load_roster(options.roster) if options.roster else None
    students = pairs.class_entries(g.submission for g in graded)
    others = pairs.reference_entries()
    if options.archive is not None:
        others += pairs.archive_entries(options.archive)
    ranked = pairs.across(students, others)
    shown = pairs.listed(ranked, rubric.flag_at)
    sources = {(e.name, e.kind): e.source for e in [*students, *others]}
    write(
        out / "similarity.csv",
        table(pairs.CSV_HEADER, pairs.csv_rows(shown, rubric.flag_at), bom=options.bom),
    )
    write(out / "similarity.html", pairs_html.page(shown, sources, rubric.flag_at))
    rows = []
    for item in graded:
        name = item.submission.student
        near = pairs.closest(ranked, name)
        flagged = item.flagged or any(
            p.flagged(rubric.flag_at) for p in ranked if name in (p.a.name, p.b.name)
        )
        student = roster.get(matching(name)) if roster is not None else None
        rows.append(gradebook_row(item, rubric, student, near, flagged))
    body = [[row.get(c, "") for c in COLUMNS] for row in rows]
    write(out / "grades.csv", table(COLUMNS, body, bom=options.bom))
    if roster is not None:
        write_canvas(graded, roster, out / "canvas.csv", rubric, options, say)


def write_canvas(
    graded: Sequence[Graded],
    roster: dict[str, Student],
    path: Path,
    rubric: Rubric,
    options: Options,
    say: Callable[[str], None],
) -> None:
    """Canvas's gradebook-import shape: one row per roster student, in roster order."""
    scores = {matching(g.submission.student): g.score.points for g in graded}
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", options.assignment]
    rows = [["    Points Possible", "", "", "", "", f"{rubric.total:g}"]]
    for key, student in roster.items():
        score = scores.get(key)
        rows.append(
            [
                student.name or student.folder,
                student.id,
                student.sis_user_id,
                student.sis_login_id or student.email,
                student.section,
                "" if score is None else f"{score:g}",
            ]
        )
    write(path, table(header, rows, bom=options.bom))
    strangers = sorted(
        g.submission.student for g in graded if matching(g.submission.student) not in roster
    )
    absent = [s.folder for key, s in roster.items() if key not in scores]
    if strangers:
        named = ", ".join(strangers)
        say(printable(f"roster: {len(strangers)} hand-ins not on the roster (no ID): {named}"))
    if absent:
        say(
            printable(
                f"roster: {len(absent)} students handed nothing in (empty in canvas.csv):"
                f" {', '.join(absent)}"
            )
        )
