"""``python -m lucyshop.lab.notebooks``: re-execute the notebooks in place against the reference.

The stored outputs are what nbval compares in CI, so they must be real outputs of a
solutions run. Run this after changing a notebook or anything its cells print.
"""

from __future__ import annotations

import os
import sys

import nbformat
from nbclient import NotebookClient

from lucyshop.lab.lesson import RECORD
from lucyshop.lab.loader import ENV, ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("13*.ipynb"))
REFERENCE = "solutions"  # what the stored outputs must come from: this tool's one job


def execute(path, *, impl: str, timeout: int = 120) -> nbformat.NotebookNode:
    """Run every cell of one notebook with ``LEASES_IMPL=impl``; raise on the first error."""
    notebook = nbformat.read(path, as_version=4)
    os.environ[ENV] = impl
    os.environ[RECORD] = "1"  # the model's replies are stored, for a kit without the model
    NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    return notebook


def main(argv: list[str]) -> int:
    for path in [ROOT / "notebooks" / name for name in argv] or NOTEBOOKS:
        nbformat.write(execute(path, impl=REFERENCE), path)
        print(f"executed {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
