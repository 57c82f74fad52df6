"""The lab reads as rooms by role: no lab folder holds more than eight modules side by side, no
source file is longer than 500 lines, and every room says in its ``__init__`` what it is for.
tests/ is rooms too: at most twelve modules (conftest.py counted) beside them.

Package plumbing (``__init__.py``, ``__main__.py``) is not counted: a room is its modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "src" / "lucyshop" / "lab"
PLUMBING = {"__init__.py", "__main__.py"}
MOST_MODULES = 8
MOST_LINES = 500
MOST_AT_TESTS_ROOT = 12
SOURCES = sorted(
    [*(ROOT / "src").rglob("*.py"), *(ROOT / "checkpoints").glob("*.py")],
)
ROOMS = sorted({LAB, *(path.parent for path in LAB.rglob("*.py"))})


def modules(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.py") if p.name not in PLUMBING)


def too_big(paths: list[Path], root: Path = ROOT) -> list[str]:
    lines = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in paths}
    return [f"{p.relative_to(root)}: {n} lines" for p, n in lines.items() if n > MOST_LINES]


def crowded(folders: list[Path], root: Path = ROOT) -> list[str]:
    return [
        f"{folder.relative_to(root).as_posix()}: {len(modules(folder))} modules"
        for folder in folders
        if len(modules(folder)) > MOST_MODULES
    ]


@pytest.mark.parametrize("room", ROOMS, ids=lambda p: p.relative_to(LAB).as_posix() or "lab")
def test_no_lab_folder_holds_more_than_eight_modules(room: Path) -> None:
    assert crowded([room]) == []


def test_no_source_file_is_longer_than_500_lines() -> None:
    assert too_big(SOURCES) == []


def test_the_tests_root_holds_rooms_and_few_modules() -> None:
    beside = sorted(p.name for p in (ROOT / "tests").glob("*.py"))
    assert len(beside) <= MOST_AT_TESTS_ROOT, beside


@pytest.mark.parametrize("room", ROOMS, ids=lambda p: p.relative_to(LAB).as_posix() or "lab")
def test_every_room_says_what_it_is_for(room: Path) -> None:
    init = room / "__init__.py"
    assert init.is_file(), f"{room.relative_to(ROOT)} is not a package"
    assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), (
        f"{init} has no docstring"
    )


def test_the_checks_find_a_crowded_folder_and_a_long_file(tmp_path: Path) -> None:
    """Both rules fail when broken: nine modules in one folder, a file of 501 lines."""
    for index in range(MOST_MODULES + 1):
        (tmp_path / f"m{index}.py").write_text("")
    (tmp_path / "__init__.py").write_text("")
    long = tmp_path / "long.py"
    long.write_text("x = 1\n" * (MOST_LINES + 1))
    assert crowded([tmp_path], root=tmp_path) == [f".: {MOST_MODULES + 2} modules"]
    assert too_big([long], root=tmp_path) == [f"long.py: {MOST_LINES + 1} lines"]
