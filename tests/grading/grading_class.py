"""A fixture class of hand-ins for the grading tests, each with what its row must say."""

from __future__ import annotations

import re
from pathlib import Path

from mutants import BY_NAME

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "solutions" / "ch13_leases.py"
INDEPENDENT = ROOT / "solutions" / "independent" / "ch13_leases.py"
STUBS = ROOT / "learner" / "ch13_leases.py"

# Local variables of the reference (never a parameter, field or key), each given another name:
# a copy a student might disguise.
RENAMES = {
    "row": "rec",
    "ordered": "srt",
    "observed": "seen",
    "rank": "pos",
    "candidate": "cand",
    "problems": "issues",
    "orders": "olist",
    "settled": "fixed",
    "report": "out",
    "entry": "item",
    "found": "hit",
    "unsent": "still_unsent",
    "released": "freed",
    "uncertain": "unsure",
    "authority": "auth",
    "cursor": "cur",
    "admission": "adm",
    "holder": "who",
}


def renamed_reference() -> str:
    """The reference with its local variables renamed (names only, never strings or keys)."""
    text = REFERENCE.read_text(encoding="utf-8")
    for old, new in RENAMES.items():
        text = re.sub(rf"(?<![\"'.\w]){old}\b(?![\"'])", new, text)
    assert text != REFERENCE.read_text(encoding="utf-8")
    return text


def stubs_with(prelude: str) -> str:
    """The stubs with ``prelude`` run at import, after the module's own imports."""
    text = STUBS.read_text(encoding="utf-8")
    marker = "from lucyshop.store import immediate, migrate  # noqa: F401\n"
    assert text.count(marker) == 1
    return text.replace(marker, marker + prelude)


def write(directory: Path, relative: str, text: str) -> None:
    path = directory / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


CHATTY = "import sys\n\nfor _ in range(40_000):\n    sys.stdout.write('x' * 100 + '\\n')\n"
HANGS = "import time\n\nwhile True:\n    time.sleep(1)\n"


def build(directory: Path) -> list[str]:
    """Write the class under ``directory``; return the students' names."""
    hand_ins = {
        "reference": ("reference/ch13_leases.py", REFERENCE.read_text(encoding="utf-8")),
        "stubs": ("stubs.py", STUBS.read_text(encoding="utf-8")),
        "mutant observe_fence": ("mutant observe_fence.py", BY_NAME["observe_fence"].source()),
        "mutant_expiry": (
            "mutant_expiry/ch13_leases.py",
            BY_NAME["assert_current_expiry"].source(),
        ),
        "mutant_percentile": (
            "mutant_percentile.py",
            BY_NAME["percentile_rank_truncated"].source(),
        ),
        "hangs": ("hangs.py", stubs_with(HANGS)),
        "syntax error": ("syntax error.py", "def claim(db, owner:\n    return None\n"),
        "zoë": ("zoë/ch13_leases.py", renamed_reference()),
        "independent": ("independent.py", INDEPENDENT.read_text(encoding="utf-8")),
        "chatty": ("chatty.py", stubs_with(CHATTY)),  # 4 MB on stdout at every import
        "empty": ("empty.py", ""),
    }
    for relative, text in hand_ins.values():
        write(directory, relative, text)
    write(directory, "no_file/notes.txt", "I forgot to upload it\n")
    return [*hand_ins, "no_file"]
