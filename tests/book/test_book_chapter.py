"""The chapter runs in the kit: every Python block it prints runs as printed, in order and in one
namespace, from the root of a copy of the kit whose learner file is the reference; and so do
its commands.

Part B's example is deterministic, so it prints the chapter's lines exactly. Part A prints the
kit's own measurements (``docs/evidence/book-ch13/``), so each of its lines has the chapter's
words with other numbers and model names, one line per row the chapter shows; recovery's rows
are one per model the kit's receipt measured.

The chapter's commands start with ``uv run python``; uv is not installed on CI, so they run
with this venv's python instead, otherwise as printed. The experiment runs ``--quick`` (through
``$LUCYSHOP_BOOK_QUICK``): the whole run takes about twenty minutes.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import types
from collections.abc import Iterator
from itertools import groupby
from pathlib import Path

import pytest

from lucyshop import IMPL_ENV
from lucyshop.lab import book
from lucyshop.lab.evidence import receipts
from lucyshop.lab.loader import CHAPTER, ROOT

CHAPTER_MODELS = ("qwen2.5:0.5b", "qwen2.5:1.5b")  # the models of the chapter's own run
NUMBER = re.compile(r"\d+(?:\.\d+)?")
COMMAND_SECONDS = 900  # far past a checkpoint (a minute) or a quick experiment (a few)


@pytest.fixture(scope="module")
def kit_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kit as the chapter sees it from its root: the book's entries, the book-shaped
    receipt, and the reference as the learner's file."""
    root = tmp_path_factory.mktemp("kit")
    shutil.copytree(ROOT / "book", root / "book")
    shutil.copytree(book.BOOK_RECEIPT.parent, root / book.BOOK_RECEIPT.parent.relative_to(ROOT))
    (root / "learner").mkdir()
    shutil.copy(ROOT / "solutions" / CHAPTER, root / "learner" / CHAPTER)
    return root


@contextlib.contextmanager
def working_in(directory: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


@pytest.fixture(scope="module")
def ran(blocks: list[book.Block], kit_copy: Path) -> tuple[list[list[str]], dict]:
    """Every block run in order in one namespace from the copy's root: what each printed, and
    the namespace after the last. The namespace is a module's, registered while the blocks run,
    as a script's or a notebook's is (the chapter's dataclass looks its module up)."""
    chapter = types.ModuleType("chapter13_blocks")
    printed = []
    with working_in(kit_copy), registered(chapter):
        for number, block in enumerate(blocks):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = compile(block.source, f"<chapter block {number}>", "exec")
                exec(code, vars(chapter))  # noqa: S102 (the chapter's own code, as printed)
            printed.append(out.getvalue().splitlines())
    return printed, vars(chapter)


@contextlib.contextmanager
def registered(module: types.ModuleType) -> Iterator[None]:
    sys.modules[module.__name__] = module
    try:
        yield
    finally:
        del sys.modules[module.__name__]


def test_the_chapter_has_twelve_blocks_and_three_commands(chapter: str, blocks) -> None:
    assert [b.part for b in blocks] == ["A"] * 5 + ["B"] * 7
    assert sum(bool(b.printed) for b in blocks) == 10
    assert book.commands(chapter) == [
        ["book/textbook/experiments/profrod_sovereign_agent_textbook_ch13_leases_v1.py"]
        + ["--out", "ch13-leases-receipt.json"],
        ["book/textbook/checkpoints/profrod_sovereign_agent_ch13_worker_recovery_checkpoint.py"],
        ["book/textbook/checkpoints/profrod_sovereign_agent_ch13_worker_recovery_checkpoint.py"]
        + ["--evidence"],
    ]


def test_part_b_prints_the_chapters_lines_exactly(blocks, ran) -> None:
    printed, _ = ran
    for block, lines in zip(blocks, printed, strict=True):
        if block.part == "B":
            assert tuple(lines) == block.printed, block.source.splitlines()[0]
    assert printed[-2][-1] == "Work outcomes: ['DONE', 'DONE']"


def shape(line: str, models: list[str]) -> str:
    """A printed line with its model names and numbers left out: its words."""
    for model in sorted(models, key=len, reverse=True):
        line = line.replace(model, "<model>")
    return " ".join(NUMBER.sub("<n>", line).split())


def runs(lines: list[str], models: list[str]) -> list[tuple[str, int]]:
    """Consecutive lines of one shape, as (shape, how many)."""
    return [(s, len(list(group))) for s, group in groupby(shape(line, models) for line in lines)]


def test_part_a_prints_the_kits_measurements_in_the_chapters_shape(blocks, ran) -> None:
    printed, namespace = ran
    measured = namespace["measured"]
    models = [*CHAPTER_MODELS, *(row["model"] for row in measured["recovery"])]
    part_a = [(b, lines) for b, lines in zip(blocks, printed, strict=True) if b.part == "A"]
    assert [bool(lines) for _, lines in part_a] == [False, True, True, True, True]
    for block, lines in part_a:
        got, wanted = runs(lines, models), runs(list(block.printed), models)
        assert [s for s, _ in got] == [s for s, _ in wanted], lines
        rows = [len(measured["recovery"]) if "<model>" in s else n for s, n in wanted]
        assert [n for _, n in got] == rows, lines
    p50 = json.loads(book.KIT_RECEIPT.read_text())["figures"]["pilot"]["p50"]
    assert printed[1][0] == f"p50 turn: {round(p50, book.DECIMALS)} s"  # the kit's, not the book's


def test_the_shape_tells_other_words_apart() -> None:
    """A changed word, or a model name left unmasked, is another shape; numbers are not."""
    line = "pilot median            lease 0.539 s: predicted 0.5, measured 0.45"
    assert shape(line, []) == shape(line.replace("0.539", "14.0"), [])
    assert shape(line, []) != shape(line.replace("predicted", "expected"), [])
    said = "qwen2.5:0.5b: placed the order again 14/20, looked it up 0/20"
    assert shape(said, ["qwen2.5:0.5b"]) == shape(said.replace("qwen2.5:0.5b", "m x"), ["m x"])
    assert runs(["a 1", "a 2", "b 3"], []) == [("a <n>", 2), ("b <n>", 1)]


def run_command(argv: list[str], root: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    """One of the chapter's commands, from the copy's root, with this venv's python for
    ``uv run python``, choosing no file of the kit's (the entry takes the copy's learner)."""
    env = {k: v for k, v in os.environ.items() if k != IMPL_ENV} | environ
    return subprocess.run(
        [sys.executable, *argv],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_SECONDS,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.timeout(COMMAND_SECONDS + 60)
def test_the_checkpoint_command_passes(chapter: str, kit_copy: Path) -> None:
    bare = book.commands(chapter)[1]
    done = run_command(bare, kit_copy)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert str((kit_copy / "learner" / CHAPTER).resolve()) in done.stdout


@pytest.mark.slow
@pytest.mark.timeout(COMMAND_SECONDS + 60)
def test_the_checkpoint_command_with_evidence_passes_and_writes_it(
    chapter: str, kit_copy: Path
) -> None:
    with_evidence = book.commands(chapter)[2]
    done = run_command(with_evidence, kit_copy)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    evidence = kit_copy.resolve() / "learner" / "runs" / book.EVIDENCE_NAME
    assert f"evidence: {evidence}" in done.stdout
    assert receipts.validate(evidence, "checkpoint") == []
    assert json.loads(evidence.read_text())["impl"] == str(evidence.parents[1] / CHAPTER)


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(COMMAND_SECONDS + 60)
def test_the_experiment_command_writes_a_receipt(
    chapter: str, kit_copy: Path, request: pytest.FixtureRequest
) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (the 'model' extra)")
    from experiment.model_lock import one_model_at_a_time

    command = book.commands(chapter)[0]
    with one_model_at_a_time(request):
        done = run_command(command, kit_copy, **{book.QUICK_ENV: "1"})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    receipt = kit_copy / "ch13-leases-receipt.json"
    assert receipts.validate(receipt, "leases") == []
    settings = json.loads(receipt.read_text())["settings"]
    assert settings["quick"] is True
    assert settings["impl"]["path"] == str((kit_copy / "learner" / CHAPTER).resolve())
