"""What a sandbox's run leaves in temporary directories, and who removes it.

A staged copy of the student's files is read-only (``jail.stage``), and so is its
directory: ``jail.remove_tree`` removes it anyway, where ``shutil.rmtree(ignore_errors=True)``
leaves it behind for every user but root. Root ignores the permission bits, so as root the
removal runs without the capabilities that let it (``setpriv``): as an ordinary user does.
A relay's directory outlives a process killed before it closed it; the next relay sweeps it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lucyshop.lab.loader import ROOT
from lucyshop.lab.sandbox import relay
from lucyshop.lab.sandbox.jail import MODE_ENV, remove_tree

REMOVE = """
import os, shutil, sys
from pathlib import Path
from lucyshop.lab.sandbox import jail
work = Path(sys.argv[1])
jail.stage(Path(sys.argv[2]), work / "case0" / "staged")
outside = work.parent / "outside"  # read-only, and reached from the tree by a link
jail.stage(Path(sys.argv[2]), outside)
(work / "case0" / "link").symlink_to(outside)
if sys.argv[3] == "remove_tree":
    jail.remove_tree(work)
else:
    shutil.rmtree(work, ignore_errors=True)
left = sorted(p.relative_to(work).as_posix() for p in work.rglob("*")) if work.exists() else "gone"
modes = {oct(os.stat(p).st_mode & 0o777) for p in (work.parent, outside)}
print(left, sorted(modes), sorted(p.name for p in outside.iterdir()))
"""


def removed_as_an_ordinary_user(work: Path, how: str) -> str:
    """What is left of ``work``, the modes of its parent and of a read-only directory outside
    it that a link inside it names, and that directory's files, after ``how`` removed it."""
    argv = [sys.executable, "-c", REMOVE, str(work), str(ROOT / "learner" / "ch13_leases.py"), how]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root, and no setpriv to drop the capabilities that ignore permissions")
        drop = "-dac_override,-dac_read_search,-fowner"
        argv = ["setpriv", f"--inh-caps={drop}", f"--bounding-set={drop}", "--", *argv]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {MODE_ENV: "none"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_staged_copy_is_removed_with_its_tree_and_nothing_outside_it_changes(tmp_path):
    tmp_path.chmod(0o755)
    left = removed_as_an_ordinary_user(tmp_path / "work", "remove_tree")
    files = "['ch13_leases.py', 'ch13_postgres.py', 'exercises.py']"
    assert left == f"gone ['0o555', '0o755'] {files}", "the parent and the linked directory kept"
    (tmp_path / "outside").chmod(0o755)  # so pytest can remove it


def test_rmtree_ignoring_errors_leaves_the_staged_copy_behind(tmp_path):
    """The control: without remove_tree the same run leaves the student's file in the tree."""
    left = removed_as_an_ordinary_user(tmp_path / "work", "rmtree")
    assert "'case0/staged/ch13_leases.py'" in left, left
    for directory, _dirs, _files in os.walk(tmp_path):  # so pytest can remove it
        os.chmod(directory, 0o700)


def test_a_relay_sweeps_the_directories_of_relays_whose_process_is_gone(monkeypatch, tmp_path):
    """A relay's directory is named for its process; a process killed before it closed its
    relay leaves it, and the next relay removes it: ours alone, and only where that process
    is gone (a live one's stays, as does another user's)."""
    monkeypatch.setattr(relay, "PARENT", tmp_path)
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    dead = tmp_path / f"{relay.PREFIX}{gone}-abc"
    live = tmp_path / f"{relay.PREFIX}{os.getpid()}-def"
    others = tmp_path / f"{relay.PREFIX}{gone}-ghi"
    unnamed = tmp_path / f"{relay.PREFIX}jkl"  # no pid in its name: not a relay of this kind
    for path in (dead, live, others, unnamed):
        path.mkdir()
        (path / relay.NAME).write_bytes(b"")
    if os.geteuid() == 0:
        os.chown(others, 65534, 65534)
    with relay.Relay(target=str(tmp_path / "nowhere")) as made:
        assert made.directory.name.startswith(f"{relay.PREFIX}{os.getpid()}-")
        assert not dead.exists(), "the dead process's relay directory was swept"
        assert live.exists() and unnamed.exists()
        assert others.exists() or os.geteuid() != 0
    assert not made.directory.exists()


def test_removing_what_is_not_there_is_nothing(tmp_path):
    remove_tree(tmp_path / "never-made")
    assert list(tmp_path.iterdir()) == []
