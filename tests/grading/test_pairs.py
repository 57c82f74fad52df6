"""Copies found between students: a classmate's file as it was, after ``ast.unparse``, after
``ruff format --line-length 60``, shipped as a compressed blob it ``exec``s, and a copied
``exercises.py`` are each flagged; the stubs, a file that differs from them by one short
function and an independently written file are not; a file that hides code as data is flagged
whatever it scores; an archive of earlier hand-ins is compared too; the similarity report is
ranked, side by side, escaped.

No check runs here: similarity reads the files only.
"""

from __future__ import annotations

import ast
import base64
import bz2
import csv
import io
import lzma

import pytest
from grading_class import (
    INDEPENDENT,
    REFERENCE,
    SOLVED_EXERCISES,
    STUBS,
    hidden_as_data,
    reformatted,
    renamed_reference,
)

from lucyshop.lab.grade.similar import pairs, pairs_html, similarity
from lucyshop.lab.grade.submissions import CHAPTER, EXERCISES

FLAG_AT = 0.8
STARTER_EXERCISES = STUBS.with_name(EXERCISES)
PERCENTILE_STUB = '    raise NotStarted("percentile", "13a § Percentiles of a turn")\n'
PERCENTILE = (
    "    ordered = sorted(_durations(values))\n"
    "    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 100:\n"
    '        raise ValueError(f"q is a percentage from 0 to 100: {q!r}")\n'
    "    rank = max(1, math.ceil(q * len(ordered) / 100))\n"
    "    return ordered[rank - 1]\n"
)


def entry(name: str, source: str, kind: str = CHAPTER) -> pairs.Entry:
    return pairs.Entry(name, kind, source)


def one_function_written() -> str:
    text = STUBS.read_text(encoding="utf-8")
    assert text.count(PERCENTILE_STUB) == 1
    return text.replace(PERCENTILE_STUB, PERCENTILE)


def flagged(a: str, b: str, kind: str = CHAPTER) -> pairs.Pair:
    return pairs.compare(entry("a", a, kind), entry("b", b, kind))


@pytest.fixture(scope="module")
def original() -> str:
    """A student's own work: the reference with its local names changed."""
    return renamed_reference()


def test_a_classmates_file_copied_as_it_was_is_flagged(original):
    pair = flagged(original, original)
    assert pair.similarity == 1.0 and pair.flagged(FLAG_AT)


def test_an_ast_unparsed_copy_is_flagged(original):
    copy = ast.unparse(ast.parse(original))
    assert copy.splitlines() != original.splitlines()
    pair = flagged(original, copy)
    assert pair.similarity == 1.0 and pair.flagged(FLAG_AT) and pair.mode == similarity.AST


def test_a_copy_reformatted_at_another_line_length_is_flagged(original):
    pair = flagged(original, reformatted(original))
    assert pair.similarity == 1.0 and pair.flagged(FLAG_AT)


def test_a_copied_exercises_file_is_flagged_and_the_starter_is_not():
    solved = SOLVED_EXERCISES.read_text(encoding="utf-8")
    assert flagged(solved, reformatted(solved), EXERCISES).flagged(FLAG_AT)
    starter = STARTER_EXERCISES.read_text(encoding="utf-8")
    untouched = flagged(starter, starter, EXERCISES)
    assert untouched.shared == 0 and not untouched.flagged(FLAG_AT)


def test_independent_work_is_not_flagged():
    pair = flagged(INDEPENDENT.read_text(encoding="utf-8"), REFERENCE.read_text(encoding="utf-8"))
    assert pair.similarity < 0.5 and not pair.flagged(FLAG_AT)


def test_the_starter_code_is_discounted():
    stubs = STUBS.read_text(encoding="utf-8")
    untouched = flagged(stubs, stubs)
    assert untouched.shared == 0 and not untouched.flagged(FLAG_AT)
    # Two files that each wrote one short function the one obvious way: the same, but too
    # little to be a copy.
    near = flagged(one_function_written(), one_function_written())
    assert 0 < near.shared < pairs.MIN_SHARED and not near.flagged(FLAG_AT)


def test_a_file_that_does_not_parse_is_compared_as_text(original):
    broken = original + '\nx = """never closed\n'
    pair = flagged(broken, original)
    assert pair.mode == similarity.TEXT and pair.flagged(FLAG_AT)
    assert pair.blocks, "the matching lines are still found"


def test_the_flag_needs_enough_shared_code_as_well_as_the_share():
    a, b = entry("a", ""), entry("b", "")
    assert not pairs.Pair(a, b, "ast", pairs.MIN_SHARED - 1, 1, 1).flagged(FLAG_AT)
    assert pairs.Pair(a, b, "ast", pairs.MIN_SHARED, 0.8, 0.1).flagged(FLAG_AT)
    assert not pairs.Pair(a, b, "ast", pairs.MIN_SHARED, 0.79, 0.1).flagged(FLAG_AT)


def test_the_class_is_compared_pairwise_with_the_archive_and_the_reference(tmp_path, original):
    archive = tmp_path / "archive" / "2024"
    (archive / "old student").mkdir(parents=True)
    (archive / "old student" / CHAPTER).write_text(original, encoding="utf-8")
    (archive / "old student" / EXERCISES).write_text("print('hi')\n", encoding="utf-8")
    students = [
        entry("ana", reformatted(original)),
        entry("bo", INDEPENDENT.read_text(encoding="utf-8")),
        entry("cy", ast.unparse(ast.parse(original))),
    ]
    others = pairs.reference_entries() + pairs.archive_entries(tmp_path / "archive")
    assert {e.kind for e in others if e.origin == pairs.ARCHIVE} == {CHAPTER, EXERCISES}
    ranked = pairs.across(students, others)
    # 3 class pairs, and each student against the reference and the one archived chapter file.
    assert len(ranked) == 3 + 3 * 2
    assert [p.similarity for p in ranked] == sorted((p.similarity for p in ranked), reverse=True)
    names = {frozenset((p.a.name, p.b.name)) for p in ranked if p.flagged(FLAG_AT)}
    assert frozenset(("ana", "cy")) in names
    assert frozenset(("ana", "archive: 2024/old student/ch13_leases.py")) in names
    assert not any("bo" in pair for pair in names)
    closest = pairs.closest(ranked, "ana")
    assert closest is not None and pairs.other(closest, "ana").origin != pairs.REFERENCE


def test_the_csv_ranks_pairs_with_numbers_and_line_ranges_no_spreadsheet_reads_as_dates(original):
    ranked = pairs.across([entry("ana", original), entry("bo", reformatted(original))])
    text = io.StringIO()
    csv.writer(text).writerows([pairs.CSV_HEADER, *pairs.csv_rows(ranked, FLAG_AT)])
    rows = list(csv.DictReader(io.StringIO(text.getvalue())))
    assert rows[0]["rank"] == "1" and float(rows[0]["similarity"]) == 1.0
    assert rows[0]["flagged"] == "yes" and int(rows[0]["shared"]) >= pairs.MIN_SHARED
    assert rows[0]["a_lines"] and "/" not in rows[0]["a_lines"] and "-" not in rows[0]["a_lines"]


def test_the_page_shows_matching_lines_side_by_side_escaped(original):
    signature = "def percentile(values: Sequence[float], q: float) -> float:\n"
    assert original.count(signature) == 1
    hostile = original.replace(signature, signature + "    # </pre><script>alert(1)</script>\n")
    students = [entry("<b>ana</b>", hostile), entry("bo & co", reformatted(hostile))]
    ranked = pairs.across(students)
    sources = {(e.name, e.kind): e.source for e in students}
    page = pairs_html.page(ranked, sources, FLAG_AT)
    assert "<script>" not in page and "&lt;/pre&gt;&lt;script&gt;" in page
    assert "&lt;b&gt;ana&lt;/b&gt;" in page and "bo &amp; co" in page
    assert "<table class='side'>" in page and "id='pair-1'" in page
    # Each side quotes its own file's lines, numbered as in that file.
    pair = ranked[0]
    a_lo, _a_hi, b_lo, _b_hi = pair.blocks[0]
    first_a = hostile.splitlines()[a_lo - 1]
    first_b = sources[(pair.b.name, CHAPTER)].splitlines()[b_lo - 1]
    assert f"{a_lo:>4}</span>" in page and pairs_html.escape(first_a) in page
    assert pairs_html.escape(first_b) in page


def test_blocks_are_one_per_function_pair(original):
    pair = flagged(original, ast.unparse(ast.parse(original)))
    spans = similarity.regions(original)
    functions = [s for s in spans if s[1] > s[0]]
    assert len(pair.blocks) >= len(functions) // 2  # not one block for the whole file
    for a_lo, a_hi, b_lo, b_hi in pair.blocks:
        assert a_lo <= a_hi and b_lo <= b_hi


def test_an_archive_that_is_not_a_directory_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no archive directory"):
        pairs.archive_entries(tmp_path / "missing")


def test_fingerprints_keep_the_lines_they_came_from():
    source = "x = 1\n" + "".join(
        f"def f{n}(a):\n    return a * {n} + len(str(a))\n" for n in range(9)
    )
    prints = similarity.fingerprints(similarity.syntax_stream(source))
    lines = source.count("\n")
    assert prints and all(1 <= lo <= hi <= lines for lo, hi in prints.values())


def test_a_copy_hidden_as_data_is_compared_as_the_code_it_runs(original):
    """The reference, or a classmate's file, compressed and encoded and ``exec``'d behind
    wrappers of its own: it scored 0.01 against the reference, and was not flagged."""
    hider = hidden_as_data(original)
    assert flagged(original, hider).flagged(FLAG_AT)
    assert similarity.similarity(hidden_as_data(REFERENCE.read_text())) >= FLAG_AT
    assert similarity.similarity(hidden_as_data(INDEPENDENT.read_text())) < FLAG_AT / 2


def test_code_hidden_several_layers_deep_is_opened(original):
    layered = base64.b85encode(lzma.compress(base64.b64encode(bz2.compress(original.encode()))))
    text = STUBS.read_text(encoding="utf-8") + f"\n_BLOB = {layered!r}\n"
    assert flagged(original, text).flagged(FLAG_AT)


def test_what_hides_code_is_named_with_its_line():
    hider = hidden_as_data(REFERENCE.read_text())
    assert [name.split()[0] for name in similarity.hiding(hider)] == ["base64", "zlib", "exec"]
    assert similarity.hiding("import re\nPATTERN = re.compile('x')\n") == []
    assert similarity.hiding("import builtins\nbuiltins.eval('1')\n") == ["eval (line 2)"]
    assert similarity.hiding("f = __import__('marshal')\n") == ["__import__ (line 1)"]


@pytest.mark.parametrize("path", [REFERENCE, STUBS, INDEPENDENT, SOLVED_EXERCISES])
def test_the_kits_own_files_hide_nothing(path):
    assert similarity.hiding(path.read_text(encoding="utf-8")) == []
