"""The reference blocker holds against the named bypasses, and its state cannot be rewritten.

Each bypass is a student's file that tries it when imported, loaded the way every sandboxed
process loads one (``block_for`` then ``load_impl``) in a child Python. The refusal must be
one line starting "reference blocked: ".
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from sandbox_files import ROOT, SOLUTIONS

LOAD = (
    "import sys\n"
    "from lucyshop.lab.loader import block_for, load_impl\n"
    "block_for(sys.argv[1])\n"
    "try:\n"
    "    load_impl(sys.argv[1])\n"
    "except ImportError as error:\n"
    "    print('REFUSED', str(error).splitlines()[0])\n"
    "else:\n"
    "    print('LOADED')\n"
)
REFERENCE = SOLUTIONS / "ch13_leases.py"
EDITED = ROOT / "spec" / "learner" / "test_percentile.py"

BYPASSES = {
    "subprocess-imports-solutions": f"""
        import subprocess, sys
        subprocess.run([sys.executable, "-c", "import solutions.ch13_leases"], cwd={str(ROOT)!r})
    """,
    "os-system": """
        import os
        os.system("cat solutions/ch13_leases.py")
    """,
    "fork-a-setsid-daemon": """
        import os
        if os.fork() == 0:
            os.setsid()
            os._exit(0)
    """,
    "hard-link": """
        open(LINK).read()
    """,
    "relative-path": """
        import os
        open(os.path.relpath(REFERENCE)).read()
    """,
    "descriptor": """
        import os
        fd = os.open(REFERENCE, os.O_RDONLY)
    """,
    "ctypes": """
        import ctypes
        ctypes.CDLL(None)
    """,
    "rewrite-the-blockers-globals": """
        import lucyshop.lab.loader as loader
        from pathlib import Path
        loader.SOLUTIONS = Path("/nowhere")
        loader._is_allowed = lambda *args: True
        loader._screen_open = lambda *args: None
        loader._student_frame = lambda *args: None
        open(REFERENCE).read()
    """,
    "replace-the-hooks-state": """
        import gc
        hook = next(f for f in gc.get_objects()
                    if callable(f) and getattr(f, "__qualname__", "") == "_make_hook.<locals>.hook")
        hook.__defaults__ = (None,) * len(hook.__defaults__)
    """,
    "chmod-by-descriptor": f"""
        import os
        fd = os.open({str(EDITED)!r}, os.O_RDONLY)
        os.fchmod(fd, os.fstat(fd).st_mode & 0o7777)  # the same mode: harmless were it let through
    """,
    "edit-the-tests": f"""
        with open({str(EDITED)!r}, "a") as tests:
            tests.write("# edited\\n")
    """,
}


@pytest.mark.parametrize("name", sorted(BYPASSES))
def test_the_bypass_is_refused_in_one_line(name, tmp_path):
    link = tmp_path / "notes.py"
    os.link(REFERENCE, link)  # the same inode as the reference, under another name
    before = EDITED.read_bytes()
    student = tmp_path / "ch13_leases.py"
    student.write_text(
        f"LINK = {str(link)!r}\nREFERENCE = {str(REFERENCE)!r}\n" + textwrap.dedent(BYPASSES[name])
    )
    result = subprocess.run(
        [sys.executable, "-c", LOAD, str(student)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = result.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("REFUSED reference blocked: "), (
        result.stdout + result.stderr
    )
    assert EDITED.read_bytes() == before


def test_a_child_that_only_loads_an_implementation_is_blocked_too(tmp_path):
    """A process started from a blocked one blocks the reference as soon as it loads a file."""
    student = tmp_path / "ch13_leases.py"
    student.write_text(f"open({str(REFERENCE)!r}).read()\n")
    child = (
        "import sys\n"
        "from lucyshop.lab.loader import load_impl\n"
        "try:\n"
        "    load_impl(sys.argv[1])\n"
        "except ImportError as error:\n"
        "    print('REFUSED', error)\n"
    )
    parent = (
        "import subprocess, sys\n"
        "from lucyshop.lab.loader import block_for\n"
        "block_for(sys.argv[1])\n"
        "subprocess.run([sys.executable, '-c', sys.argv[2], sys.argv[1]])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", parent, str(student), child],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "LUCYSHOP_BLOCKED"},
    )
    assert "REFUSED reference blocked: " in result.stdout, result.stdout + result.stderr


def test_the_kit_itself_may_still_start_processes_after_blocking():
    """Only the student's frames are refused: the checkpoint and the tests start children."""
    code = (
        "import subprocess, sys\n"
        "from lucyshop.lab.loader import block_for\n"
        "block_for('learner')\n"
        "print(subprocess.run([sys.executable, '-c', 'print(42)'], capture_output=True,"
        " text=True).stdout.strip())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.strip() == "42", result.stdout + result.stderr
