"""The notebooks: clean under the reference (nbval against stored outputs), stopped by the stubs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import lab_browser
import nbformat
import pytest
from nbclient import NotebookClient

from lucyshop.lab import notebooks, postgres
from lucyshop.lab.report import FUNCTIONS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("13*.ipynb"))
CELL_TIMEOUT = 45
NBVAL = [
    "--nbval",
    "--nbval-current-env",
    "--nbval-sanitize-with",
    str(ROOT / "notebooks" / "sanitize.cfg"),
    "--nbval-cell-timeout",
    str(CELL_TIMEOUT),
    "-p",
    "no:cacheprovider",
    "-q",
]


def nbval(*paths: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = os.environ | {"LEASES_IMPL": "solutions"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", *NBVAL, *map(str, paths)],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT / "notebooks",
    )


def runnable(notebook: Path) -> Path:
    """The notebook, or a skip saying why this machine cannot run it (13d needs PostgreSQL)."""
    if notebook.stem.startswith("13d") and (reason := postgres.missing()):
        pytest.skip(f"{notebook.name} runs PostgreSQL: {reason}")
    return notebook


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_matches_its_stored_outputs_under_the_reference(notebook, own_tmpdir):
    result = nbval(runnable(notebook))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_outputs_are_real(notebook):
    """Every code cell was executed and stored; only genuinely variable cells skip comparison."""
    cells = [c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"]
    assert cells and all(
        c.execution_count for c in cells if "skip-execution" not in c.metadata.get("tags", [])
    )
    ignored = [c for c in cells if "nbval-ignore-output" in c.metadata.get("tags", [])]
    assert len(ignored) <= 2, "tag only the cells whose output genuinely varies"


def code_cells(notebook: Path) -> list:
    return [c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"]


def outputs_text(cell) -> str:
    """Everything a cell's outputs show as text (streams, results, errors)."""
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", ""))
        parts += [str(v) for k, v in output.get("data", {}).items() if k.startswith("text/")]
        parts += output.get("traceback", [])
    return "\n".join(parts)


def is_check(cell) -> bool:
    return cell.source.startswith("check(")


@pytest.mark.timeout(900)
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_under_the_stubs_every_cell_says_what_to_finish_first(notebook, monkeypatch, own_tmpdir):
    """Run to the end under the untouched stubs: the first error is the first stub's
    NotStarted; no KeyError, and no traceback cascade: every error after it is one line naming
    what to finish; every check says NOT STARTED, and PASSING appears nowhere."""
    monkeypatch.setenv("LEASES_IMPL", "learner")
    nb = nbformat.read(runnable(notebook), as_version=4)
    NotebookClient(
        nb,
        timeout=300,
        allow_errors=True,
        kernel_name="python3",
        resources={"metadata": {"path": str(notebook.parent)}},
    ).execute()
    code = [c for c in nb.cells if c.cell_type == "code" and c.get("execution_count")]
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert errors and errors[0]["ename"] == "NotStarted", errors[:1]
    assert "is not started: read notebook 13" in errors[0]["evalue"]
    for error in errors:
        assert error["ename"] != "KeyError", error
        assert len(error["traceback"]) == 1, "a traceback cascade:\n" + "\n".join(
            error["traceback"]
        )
        if error["ename"] == "NameError":
            assert "finish it first" in error["traceback"][0], error["traceback"][0]
    checks = [c for c in code if is_check(c)]
    assert all("NOT STARTED" in outputs_text(c) for c in checks)  # which exist: next test
    shown = [outputs_text(c) for c in code]
    assert not [text for text in shown if "PASSING" in text]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_check_follows_every_function_section(notebook):
    checked = {c.source.split('"')[1] for c in code_cells(notebook) if is_check(c)}
    expected = {
        "13a": set(FUNCTIONS[:6]),  # Part A: the arithmetic
        "13b": set(FUNCTIONS[6:]),  # Part B: the shop
        "13c": {f"exercise {n}" for n in range(1, 5)},
        "13d": set(),  # exercise 7 is not a row of make check yet
    }[notebook.stem[:3]]
    assert checked == expected


# The plots each notebook draws; a cell that shows a figure must be tagged "plot".
PLOTS = {"13a": 2, "13b": 0, "13c": 0, "13d": 1}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_plot_cell_stores_an_image(notebook):
    cells = code_cells(notebook)
    drawing = [c for c in cells if "plt.show()" in c.source or "Image(" in c.source]
    plots = [c for c in cells if "plot" in c.metadata.get("tags", [])]
    assert drawing == plots and len(plots) == PLOTS[notebook.stem[:3]]
    for cell in plots:
        images = [o for o in cell.outputs if "image/png" in o.get("data", {})]
        assert images, f"a plot cell stored no image:\n{cell.source}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_fits_88_columns(notebook):
    wide = [line for c in code_cells(notebook) for line in c.source.splitlines() if len(line) > 88]
    assert not wide


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_outputs_name_no_absolute_path(notebook):
    shown = "\n".join(outputs_text(c) for c in code_cells(notebook))
    for place in (str(ROOT), "/tmp/", "/home/", "/root/"):
        assert place not in shown


def diagrams_in(notebook: Path) -> int:
    """Mermaid fences in the markdown cells, and in the stored markdown outputs."""
    nb = nbformat.read(notebook, as_version=4)
    fences = sum(c.source.count("```mermaid") for c in nb.cells if c.cell_type == "markdown")
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            fences += str(output.get("data", {}).get("text/markdown", "")).count("```mermaid")
    return fences


DIAGRAMS = {"13a": 1, "13b": 4, "13c": 0, "13d": 0}


@pytest.mark.timeout(600)
def test_jupyterlab_draws_every_diagram_and_plot(tmp_path):
    """Each notebook, opened in JupyterLab under headless Chromium: every mermaid diagram is
    drawn as SVG and every plot cell shows a decoded image. The server serves a copy, so
    nothing the page does can touch the notebooks."""
    reason = lab_browser.missing()
    if reason:
        pytest.skip(f"browser test: {reason}")
    root = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", root)
    with lab_browser.jupyterlab(root, tmp_path) as url, lab_browser.chromium(tmp_path) as driver:
        for notebook in NOTEBOOKS:
            stem = notebook.stem[:3]
            assert diagrams_in(notebook) == DIAGRAMS[stem]
            want = {
                "cells": len(nbformat.read(notebook, as_version=4).cells),
                "svg": DIAGRAMS[stem],
                "images": PLOTS[stem],
            }
            counts = lab_browser.seen(driver, url, notebook.name, want, timeout=120)
            assert counts == {**want, "diagrams": DIAGRAMS[stem]}, (notebook.name, counts)


def test_without_the_model_a_turn_replays_the_stored_replies(monkeypatch):
    """`make lab` alone installs no model: the owned loop's cell replays what the model said
    when the notebook was executed, and says how to build it."""
    from lucyshop.lab import lesson
    from lucyshop.models import ModelUnavailable

    def not_built(**_):
        raise ModelUnavailable("install the model extra")

    monkeypatch.setattr(lesson, "EmbeddedModel", not_built)
    model, which = lesson.turn_model("owned_loop")
    assert "make model" in which
    stored = json.loads((ROOT / "notebooks" / "stored" / "owned_loop.json").read_text())
    replies = [model.chat([{"role": "user", "content": "?"}]) for _ in stored]
    assert [reply.text for reply in replies] == [row["text"] for row in stored]


def verdict_cell(*lines: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("check(...)")
    cell.outputs = [
        nbformat.v4.new_output(
            "execute_result", {"text/plain": "\n".join(lines)}, execution_count=1
        )
    ]
    return cell


def test_re_executing_writes_no_notebook_in_which_a_check_did_not_pass(tmp_path, monkeypatch):
    """``python -m lucyshop.lab.notebooks`` once stored "FAILING (0/0 checks)" for every check
    (a broken conftest): nbval then held every later run to it. Now it refuses to write."""
    ran = nbformat.v4.new_notebook()
    ran.cells = [
        verdict_cell("percentile: PASSING (24/24 checks)"),
        verdict_cell("claim: FAILING (0/0 checks)", "  no test ran"),
        verdict_cell("exercise 2: NOT STARTED", "  read notebook 13c § Exercise 2"),
        nbformat.v4.new_code_cell(
            "print(...)",
            outputs=[
                nbformat.v4.new_output(
                    "stream",
                    name="stdout",
                    text="reconcile: [('UNKNOWN', 'ACCEPTED')]\n"
                    "your receipt: NOT STARTED: no exercise5-receipt.json yet\n",
                )
            ],
        ),
    ]
    assert notebooks.checks_not_passing(ran) == [
        "claim: FAILING (0/0 checks)",
        "exercise 2: NOT STARTED",
    ]
    (tmp_path / "notebooks").mkdir()
    stored = tmp_path / "notebooks" / "13x.ipynb"
    stored.write_text("as it was", encoding="utf-8")
    monkeypatch.setattr(notebooks, "ROOT", tmp_path)
    monkeypatch.setattr(notebooks, "execute", lambda path, impl: ran)
    assert notebooks.main(["13x.ipynb"]) == 1
    assert stored.read_text(encoding="utf-8") == "as it was"
    ran.cells = ran.cells[:1] + ran.cells[3:]  # every check passes: written
    assert notebooks.main(["13x.ipynb"]) == 0
    assert nbformat.read(stored, as_version=4) == ran


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_stored_check_passes(notebook):
    assert notebooks.checks_not_passing(nbformat.read(notebook, as_version=4)) == []
