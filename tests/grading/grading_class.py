"""A fixture class of hand-ins for the grading tests, each with what its row must say."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import zlib
from pathlib import Path

from mutants import BY_NAME

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "solutions" / "ch13_leases.py"
INDEPENDENT = ROOT / "solutions" / "independent" / "ch13_leases.py"
STUBS = ROOT / "learner" / "ch13_leases.py"
SOLVED_EXERCISES = ROOT / "solutions" / "exercises.py"

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
    "settlements": "out",
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


def hidden_as_data(source: str) -> str:
    """A chapter file that runs ``source`` shipped as a zlib and base64 blob (``make grade``
    meets one with wrappers of its own: ``tests/sandbox/test_hostile_hidden.py``)."""
    blob = base64.b64encode(zlib.compress(source.encode("utf-8"))).decode("ascii")
    return f"import base64, zlib\n\nexec(zlib.decompress(base64.b64decode({blob!r})))\n"


def renamed_reference() -> str:
    """The reference with its local variables renamed (names only, never strings or keys)."""
    text = REFERENCE.read_text(encoding="utf-8")
    for old, new in RENAMES.items():
        text = re.sub(rf"(?<![\"'.\w]){old}\b(?![\"'])", new, text)
    assert text != REFERENCE.read_text(encoding="utf-8")
    return text


def reformatted(source: str, line_length: int = 60) -> str:
    """``source`` as ``ruff format --line-length N`` writes it: a copy disguised by a formatter."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", f"--line-length={line_length}", "-"],
        input=source,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout != source
    return done.stdout


def stubs_with(prelude: str) -> str:
    """The stubs with ``prelude`` run at import, after the module's own imports."""
    text = STUBS.read_text(encoding="utf-8")
    marker = "from lucyshop.queue import WorkQueue\n"
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
        # The reference renamed and reformatted: a classmate's copy (the reference's) disguised.
        "zoë": ("zoë/ch13_leases.py", reformatted(renamed_reference())),
        "independent": ("independent.py", INDEPENDENT.read_text(encoding="utf-8")),
        "chatty": ("chatty.py", stubs_with(CHATTY)),  # 4 MB on stdout at every import
    }
    for relative, text in hand_ins.values():
        write(directory, relative, text)
    write(directory, "no_file/notes.txt", "I forgot to upload it\n")
    # Two hand-ins that are never checked (no chapter file; an empty one) still hand in the same
    # exercises.py, one reformatted: compared all the same, at no check's cost.
    solved = SOLVED_EXERCISES.read_text(encoding="utf-8")
    write(directory, "no_file/exercises.py", solved)
    write(directory, "empty/exercises.py", reformatted(solved))
    write(directory, "empty/ch13_leases.py", "")
    return [*hand_ins, "empty", "no_file"]
