"""Each word of the lab means one thing, and each status word is stated once.

- **judge** is only the trusted reader of a checkpoint's kept files
  (``lucyshop.lab.checkpoint.judge``); **verdict** only what one check of one file came to, as
  ``make grade`` reads it (``lucyshop.lab.grade``, whose ``Verdict`` it is, and its
  ``VerdictStatus``). No other function, class, variable, argument or attribute of the lab is
  named after either (the glossary at the top of ``lucyshop.lab`` says so too).
- A status word (PASSING, FAILED, CHECKED, a checkpoint case's "pass", ...) is written once,
  in ``lucyshop.lab.statuses``; the lab's code says ``Status.PASSING``, never the bare string.
- The tests swap a module's attribute only through ``monkeypatch`` or ``mock.patch.object``
  (which put it back), never by assigning to it.

Each rule is checked by a function that a planted bad file shows finds what it should.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from lucyshop.lab.statuses import CaseResult, CheckpointStatus, Status, VerdictStatus

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "src" / "lucyshop" / "lab"
WORDS = {word: re.compile(word, re.IGNORECASE) for word in ("judge", "verdict")}
# Where each word may name things: the module that is the judge; the grade, whose Verdict it is.
ALLOWED = {
    "judge": ("checkpoint/judge.py",),
    "verdict": ("grade/", "statuses.py"),
}
STATUS_WORDS = {
    str(word) for enum in (Status, CheckpointStatus, VerdictStatus, CaseResult) for word in enum
}
# The rooms whose code reads and writes statuses, and the one exception, which is not a check's.
STATUS_ROOMS = ("check", "checkpoint", "grade", "lesson", "bench")
NOT_A_STATUS = {"grade/gradescope/stockimage.py": {"PASSED", "FAILED"}}  # the image proof's
# Hand-ins that attack the kit: their swaps are the attack, run inside the student's sandbox.
HAND_INS = ROOT / "tests" / "judge" / "hostile"


def named(tree: ast.AST) -> list[tuple[int, str]]:
    """Every name the code gives: functions, classes, variables, arguments, attributes set, and
    the aliases of imports (``import x as verdict``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.append((node.lineno, node.name))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.arg):
            found.append((node.lineno, node.arg))
        elif isinstance(node, ast.alias) and node.asname:
            found.append((getattr(node, "lineno", 0), node.asname))
    return found


def stray_names(root: Path) -> list[str]:
    """``path:line: name`` for each name with judge or verdict in it outside where it may be."""
    stray = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        for line, name in named(ast.parse(path.read_text(encoding="utf-8"))):
            for word, pattern in WORDS.items():
                if pattern.search(name) and not where.startswith(ALLOWED[word]):
                    stray.append(f"{where}:{line}: {name}")
    return stray


def bare_statuses(root: Path, rooms: tuple[str, ...] = STATUS_ROOMS) -> list[str]:
    """``path:line: 'WORD'`` for each string that is exactly a status word, in ``rooms``."""
    found = []
    for room in rooms:
        for path in sorted((root / room).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Constant)
                    and node.value in STATUS_WORDS
                    and node.value not in NOT_A_STATUS.get(where, ())
                ):
                    found.append(f"{where}:{node.lineno}: {node.value!r}")
    return found


def manual_swaps(path: Path) -> list[str]:
    """Each assignment to an attribute of an imported name (``loader.ROOT = ...``,
    ``sys.stdout = ...``): a swap that is not put back when the test fails."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported |= {a.asname or a.name for a in node.names}
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        targets += [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for target in targets:
            base = target
            while isinstance(base, ast.Attribute):
                base = base.value
            if target is not base and isinstance(base, ast.Name) and base.id in imported:
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(target)}")
    return found


# ---------------------------------------------------------------- the rules


def test_judge_and_verdict_each_name_one_thing():
    assert stray_names(LAB) == []


def test_no_status_word_is_a_bare_string():
    assert bare_statuses(LAB) == []


def test_no_test_swaps_an_attribute_by_hand():
    tests = [p for p in (ROOT / "tests").rglob("*.py") if HAND_INS not in p.parents]
    assert [line for path in sorted(tests) for line in manual_swaps(path)] == []


def test_the_glossary_gives_each_word_its_one_home():
    import lucyshop.lab

    glossary = lucyshop.lab.__doc__
    assert "**judge** (``lab.checkpoint.judge``), and only it" in glossary
    assert "**verdict** (``lab.grade.verdict``), and only it" in glossary
    assert "``lab.statuses``" in glossary


# ---------------------------------------------------------------- each rule fails when broken


def test_a_planted_judge_or_verdict_is_found(tmp_path):
    (tmp_path / "check").mkdir()
    (tmp_path / "check" / "report.py").write_text(
        "def verdict(label):\n    judged = label\n    return judged\n"
        "class Judge:\n    def run(self, *, verdict_file=None):\n        self.judge_seconds = 1\n"
        "from json import loads as judge_loads\n"
    )
    (tmp_path / "grade").mkdir()
    (tmp_path / "grade" / "verdict.py").write_text("class Verdict:\n    pass\n")  # its home
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "judge.py").write_text("def judge(): pass\n")  # its home
    assert sorted(stray_names(tmp_path)) == [
        "check/report.py:1: verdict",
        "check/report.py:2: judged",
        "check/report.py:4: Judge",
        "check/report.py:5: verdict_file",
        "check/report.py:6: judge_seconds",
        "check/report.py:7: judge_loads",
    ]


def test_a_planted_bare_status_is_found(tmp_path):
    (tmp_path / "grade").mkdir()
    (tmp_path / "grade" / "rubric.py").write_text(
        'EARNS = ("NOT STARTED",)\nok = row.status == "PASSING"\nsaid = f"{x} PASSING"\n'
    )
    assert bare_statuses(tmp_path, ("grade",)) == [
        "grade/rubric.py:1: 'NOT STARTED'",
        "grade/rubric.py:2: 'PASSING'",
    ]


def test_a_planted_manual_swap_is_found(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text(
        "import sys\nfrom lucyshop.lab import loader\n\n"
        "def test_x(monkeypatch):\n"
        "    sys.stdout = open('/dev/null', 'w')\n"
        "    loader.ROOT = None\n"
        "    monkeypatch.setattr(loader, 'ENV', 'X')\n"
        "    local = object()\n"
    )
    assert manual_swaps(bad) == ["test_bad.py:5: sys.stdout", "test_bad.py:6: loader.ROOT"]
