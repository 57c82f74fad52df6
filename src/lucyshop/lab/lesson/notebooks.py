"""``python -m lucyshop.lab.lesson.notebooks``: re-execute the notebooks in place on the stubs.

The stored outputs are what a learner sees on a fresh clone, and what nbval compares in CI,
so they are real outputs of a run on the untouched stubs (``learner/``): every check of a
function the learner writes says NOT STARTED, and no stored output says PASSING for work the
learner has not done. The chapter's ready-made parts arrive written in the learner's file
(``written_in_the_stubs``), so their checks say PASSING, as ``make check``'s rows do. A
notebook in which any other check says anything but NOT STARTED, or any other output says
PASSING, is not written.

First the reference's checkpoint is run once and its timeline kept
(``notebooks/stored/checkpoint_reference.json``): 13b's diagrams show it, labelled as the
reference's, until the learner's own checkpoint passes the case they draw.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from lucyshop import IMPL_ENV
from lucyshop.lab.check.subjects import FUNCTIONS, PG_ROWS, subjects
from lucyshop.lab.checkpoint.launch import checkpoint_command
from lucyshop.lab.given.stubs import stub_nodes
from lucyshop.lab.lesson.show import RECORD, record_reference_checkpoint
from lucyshop.lab.loader import ROOT
from lucyshop.lab.services.limits import CHECKPOINT_SECONDS
from lucyshop.lab.statuses import Mark, Status, result_line

NOTEBOOKS = sorted((ROOT / "notebooks").glob("13*.ipynb"))
STUBS = "learner"  # what the stored outputs come from: the untouched stubs
REFERENCE = "solutions"  # what 13b's recorded checkpoint run comes from


def execute(path, *, impl: str, timeout: int = 300) -> nbformat.NotebookNode:
    """Run every cell of one notebook with ``LEASES_IMPL=impl``; raise on the first error."""
    notebook = nbformat.read(path, as_version=4)
    os.environ[IMPL_ENV] = impl
    os.environ[RECORD] = "1"  # the model's replies are stored, for a kit without the model
    NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    return notebook


def _texts(notebook: nbformat.NotebookNode) -> list[str]:
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain", "")
            texts.append("".join(text) + "".join(output.get("traceback", [])))
    return texts


def written_in_the_stubs() -> tuple[str, ...]:
    """The rows whose functions arrive written in the shipped learner file (the chapter's
    ready-made parts): their checks pass on a fresh clone."""
    stubs = stub_nodes(ROOT / STUBS / "ch13_leases.py")
    return tuple(function for function in FUNCTIONS if function not in stubs)


def _first_lines(labels: list[str], status: str) -> re.Pattern[str]:
    """A check's first line, ``label: STATUS`` (``FAILING (0/8 tests)``), for ``labels``."""
    names = "|".join(re.escape(label) for label in labels)
    return re.compile(rf"^(?:{names}): {status}$", re.MULTILINE)


def checks_saying(notebook: nbformat.NotebookNode, *, but: str) -> list[str]:
    """Every check's first line in the notebook's outputs whose status is not ``but``, bar the
    checks of the ready-made parts, which pass on the stubs too."""
    written = written_in_the_stubs()
    labels = [row.label for row in [*subjects(), *PG_ROWS] if row.label not in written]
    status = rf"(?!{re.escape(but)}\b)[A-Z][A-Z ]*(?: \(\d+/\d+ tests\))?"
    first_line = _first_lines(labels, status)
    return [found for text in _texts(notebook) for found in first_line.findall(text)]


def checks_not_passing(notebook: nbformat.NotebookNode) -> list[str]:
    """Every check's first line that does not say PASSING (a run on the reference)."""
    return checks_saying(notebook, but=Status.PASSING)


def not_storable(notebook: nbformat.NotebookNode) -> list[str]:
    """Why a run may not be stored: a check that does not say NOT STARTED (bar the ready-made
    parts' checks, which pass), any other output that says PASSING or holds a result line that
    passed, an error output. Empty when it may."""
    passed = result_line(Mark.PASS, "")  # how a result line that passed opens
    given = _first_lines(list(written_in_the_stubs()), rf"{Status.PASSING} \(\d+/\d+ tests\)")
    found = checks_saying(notebook, but=Status.NOT_STARTED)
    for text in _texts(notebook):
        text = given.sub("", text)
        if Status.PASSING in text or any(line.startswith(passed) for line in text.splitlines()):
            found.append(text.strip().splitlines()[0])
    found += [
        f"error: {output.get('ename')}: {output.get('evalue')}"
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    return found


def record_checkpoint() -> None:
    """Run the checkpoint on the reference once and keep its timeline for 13b's diagrams."""
    with tempfile.TemporaryDirectory(prefix="ch13-reference-") as tmp:
        evidence = Path(tmp) / "evidence.json"
        command = checkpoint_command(REFERENCE, evidence=evidence)
        subprocess.run(command, check=True, capture_output=True, timeout=CHECKPOINT_SECONDS)
        record_reference_checkpoint(evidence)


def main(argv: list[str]) -> int:
    paths = [ROOT / "notebooks" / name for name in argv] or NOTEBOOKS
    if any(path.stem.startswith("13b") for path in paths):  # its diagrams and prediction
        record_checkpoint()
    for path in paths:
        notebook = execute(path, impl=STUBS)
        if problems := not_storable(notebook):
            print(f"not written: {path.relative_to(ROOT)}: on the stubs {problems}")
            return 1
        nbformat.write(notebook, path)
        print(f"executed {path.relative_to(ROOT)} on the stubs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
