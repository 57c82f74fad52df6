"""``python -m lucyshop.lab.notebooks``: re-execute the notebooks in place against the reference.

The stored outputs are what nbval compares in CI, so they must be real outputs of a
solutions run. Run this after changing a notebook or anything its cells print. A notebook in
which a check did not pass is not written: under the reference every check passes, and a
stored FAILING would be what nbval then holds every later run to.
"""

from __future__ import annotations

import os
import re
import sys

import nbformat
from nbclient import NotebookClient

from lucyshop.lab.lesson import RECORD
from lucyshop.lab.loader import ENV, ROOT
from lucyshop.lab.report import subjects

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


def checks_not_passing(notebook: nbformat.NotebookNode) -> list[str]:
    """Every check's first line in the notebook's outputs that does not say PASSING."""
    labels = "|".join(re.escape(label) for label, *_ in subjects())
    status = r"(?!PASSING\b)[A-Z][A-Z ]*(?: \(\d+/\d+ checks\))?"  # "FAILING (0/8 checks)"
    verdict = re.compile(rf"^(?:{labels}): {status}$", re.MULTILINE)
    found = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain", "")
            found += verdict.findall("".join(text))
    return found


def main(argv: list[str]) -> int:
    for path in [ROOT / "notebooks" / name for name in argv] or NOTEBOOKS:
        notebook = execute(path, impl=REFERENCE)
        if failing := checks_not_passing(notebook):
            print(f"not written: {path.relative_to(ROOT)}: under the reference {failing}")
            return 1
        nbformat.write(notebook, path)
        print(f"executed {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
