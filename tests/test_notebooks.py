"""The notebooks: clean under the reference (nbval against stored outputs), stopped by the stubs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

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


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_matches_its_stored_outputs_under_the_reference(notebook):
    result = nbval(notebook)
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


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_stubs_stop_at_the_first_student_function(notebook, monkeypatch):
    monkeypatch.setenv("LEASES_IMPL", "learner")
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        nb,
        timeout=60,
        kernel_name="python3",
        resources={"metadata": {"path": str(notebook.parent)}},
    )
    with pytest.raises(CellExecutionError) as stopped:
        client.execute()
    message = str(stopped.value)
    assert "NotStarted" in message and "is not started: read notebook 13" in message, message[
        -2000:
    ]
    failing = next(
        i
        for i, c in enumerate(nb.cells)
        if any(o.get("output_type") == "error" for o in c.get("outputs", []))
    )
    earlier = [c for c in nb.cells[:failing] if c.cell_type == "code"]
    assert all(
        not any(o.get("output_type") == "error" for o in c.get("outputs", [])) for c in earlier
    )
