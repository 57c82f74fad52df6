"""The chapter's Part B, typed in as printed, passes ``make check``: a hand-in whose
``LEASE_MIGRATIONS``, ``open_worker_shop``, ``Claim``, ``enqueue``, ``claim``,
``assert_current``, ``observe``, ``finish`` and ``recover_once`` are the chapter's, the rest
(Part A, the kit's own ``reconcile`` and ``cancel``) the reference's, has every chapter row
PASSING and the checkpoint PASSING. Rows beyond the book may fail: the chapter does not teach
them. The one line changed is the chapter's ``runpy`` load of chapter 11, which names a path
relative to the kit's root: the hand-in imports ``lucyshop.approval`` instead, which that file
hands on.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lucyshop.lab import book
from lucyshop.lab.loader import CHAPTER, ROOT

BOOK_NAMES = (
    "LEASE_MIGRATIONS",
    "open_worker_shop",
    "Claim",
    "enqueue",
    "claim",
    "assert_current",
    "observe",
    "finish",
    "recover_once",
)
LOADING = "APPROVAL"  # the chapter's name for what its runpy load of chapter 11 returns
IMPORTED = "from lucyshop import approval\n\nAPPROVAL = vars(approval)\n"
CHECK_SECONDS = 1500  # far past a make check of a finished file (minutes on two cores)


def defined(node: ast.stmt) -> str | None:
    """The name a top-level statement defines, if it is a def, a class or one assignment."""
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return node.name
    targets = node.targets if isinstance(node, ast.Assign) else []
    targets = [node.target] if isinstance(node, ast.AnnAssign) else targets
    return targets[0].id if len(targets) == 1 and isinstance(targets[0], ast.Name) else None


def lines_of(node: ast.stmt) -> tuple[int, int]:
    """A statement's lines (from 0, end excluded), its decorators included."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return first - 1, node.end_lineno


def text_of(source: str, node: ast.stmt) -> str:
    start, end = lines_of(node)
    return "\n".join(source.splitlines()[start:end]) + "\n"


def chapter_code(blocks: list[book.Block]) -> str:
    """Part B's imports and definitions, in the chapter's order, with its load of chapter 11
    replaced by an import; none of its demonstrations."""
    imports, kept = [], []
    for block in blocks:
        if block.part != "B":
            continue
        for node in ast.parse(block.source).body:
            name = defined(node)
            if isinstance(node, ast.Import | ast.ImportFrom):
                imports.append(text_of(block.source, node))
            elif name == LOADING:
                kept.append(IMPORTED)
            elif name in (*BOOK_NAMES, "execute"):
                kept.append(text_of(block.source, node))
    return "".join(imports) + "\n" + "\n\n".join(kept)


def hand_in(blocks: list[book.Block]) -> str:
    """The reference with its versions of the chapter's names taken out and the chapter's code
    put where the first of them was."""
    reference = (ROOT / "solutions" / CHAPTER).read_text(encoding="utf-8")
    spans = [lines_of(n) for n in ast.parse(reference).body if defined(n) in BOOK_NAMES]
    lines = reference.splitlines(keepends=True)
    for start, end in reversed(spans):
        del lines[start:end]
    lines.insert(spans[0][0], chapter_code(blocks) + "\n\n")
    return "".join(lines)


def definitions(source: str) -> dict[str, list[str]]:
    """Each of the chapter's names, with every top-level definition of it in ``source``."""
    found: dict[str, list[str]] = {name: [] for name in BOOK_NAMES}
    for node in ast.parse(source).body:
        if defined(node) in BOOK_NAMES:
            found[defined(node)].append(ast.dump(node))
    return found


def test_the_hand_in_holds_the_chapters_code_and_no_other(blocks) -> None:
    written = definitions(hand_in(blocks))
    chapter = definitions("\n".join(b.source for b in blocks if b.part == "B"))
    reference = definitions((ROOT / "solutions" / CHAPTER).read_text())
    assert written == chapter
    assert all(len(found) == 1 for found in written.values()), written
    assert written["claim"] != reference["claim"]  # so the check below is not the reference's


@pytest.mark.slow
@pytest.mark.timeout(CHECK_SECONDS + 60)
def test_make_check_passes_every_chapter_row_and_the_checkpoint(blocks, tmp_path: Path) -> None:
    impl = tmp_path / CHAPTER
    impl.write_text(hand_in(blocks))
    out = tmp_path / "check.json"
    done = subprocess.run(
        [sys.executable, "-m", "lucyshop.lab.check", "--impl", str(impl)]
        + ["--no-measured", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=CHECK_SECONDS,
        check=False,
    )
    assert out.is_file(), done.stdout[-4000:] + done.stderr[-4000:]
    result = json.loads(out.read_text())
    failing = {
        row["label"]: row["failures"] or row["message"]
        for row in result["rows"]
        if row["kind"] == "function" and row["status"] != "PASSING"
    }
    assert failing == {}, done.stdout[-6000:]
    assert result["checkpoint"]["status"] == "PASSING", result["checkpoint"]
