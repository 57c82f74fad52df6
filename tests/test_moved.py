"""Old import paths keep working for one term: a hand-in written against the flat lab (before
the rooms) imports the same modules, is warned where each moved, and is checked as before."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lucyshop.lab.moved import MOVED
from tests.judge.judge_files import check, rows

ROOT = Path(__file__).resolve().parent.parent
OLD = {new: old for old, new in MOVED.items()}
FROM_ROOM = re.compile(r"^from (lucyshop\.lab\.\w+) import (\w+)(?: as (\w+))?", re.MULTILINE)
DOTTED = re.compile("|".join(re.escape(new) for new in sorted(OLD, key=len, reverse=True)))


def written_before_the_move(text: str) -> str:
    """The file as it was written against the flat lab: every moved module by its old path."""

    def one_import(match: re.Match) -> str:
        package, name, alias = match.groups()
        if f"{package}.{name}" not in OLD:
            return match.group(0)
        old = OLD[f"{package}.{name}"].rpartition(".")[2]
        local = alias or name
        return f"from lucyshop.lab import {old}" + (f" as {local}" if local != old else "")

    return DOTTED.sub(lambda m: OLD[m.group(0)], FROM_ROOM.sub(one_import, text))


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_moved_module_itself_with_a_warning(old: str) -> None:
    script = (
        "import importlib, warnings\n"
        "warnings.simplefilter('error')\n"
        f"new = importlib.import_module({MOVED[old]!r})\n"
        "try:\n"
        f"    importlib.import_module({old!r})\n"
        "except DeprecationWarning as warning:\n"
        "    print(warning)\n"
        "warnings.simplefilter('ignore')\n"
        f"assert importlib.import_module({old!r}) is new\n"
        f"assert new.__spec__.name == {MOVED[old]!r}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert f"has moved to {MOVED[old]}" in done.stdout


def test_a_name_never_moved_is_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("lucyshop.lab.never_was_here")


def test_a_hand_in_written_before_the_move_is_checked_as_before(tmp_path: Path) -> None:
    """The reference's three files, with the lab's old paths, are all PASSING."""
    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    for name in ("ch13_leases.py", "exercises.py", "ch13_postgres.py"):
        text = written_before_the_move((ROOT / "solutions" / name).read_text(encoding="utf-8"))
        assert not any(new in text for new in OLD), f"{name} still names a new path"
        (hand_in / name).write_text(text, encoding="utf-8")
    assert "from lucyshop.lab import exercise_kit as kit" in (hand_in / "exercises.py").read_text()
    _, data, printed = check(
        hand_in / "ch13_leases.py", tmp_path, "--no-checkpoint", "--no-measured"
    )
    statuses = {label: row["status"] for label, row in rows(data).items()}
    wrong = {
        label: status
        for label, status in statuses.items()
        if status != "PASSING" and not (status == "LEFT OUT" and label.startswith("exercise"))
    }
    assert statuses and wrong == {}, printed
