"""Each word of the lab means one thing, each status word is stated once, and each module of
the kit goes by its own name.

- **judge** is only the trusted reader of a checkpoint's kept files
  (``lucyshop.lab.checkpoint.judge``); **verdict** only what one check of one file came to, as
  ``make grade`` reads it (``lucyshop.lab.grade``, whose ``Verdict`` it is, and its
  ``VerdictStatus``). No function, class, variable, argument or attribute of ``src/`` or
  ``checkpoints/`` is named after either outside those homes. Nor does any prose say otherwise:
  the docstrings, comments and strings (what the kit prints and writes) of that code, the
  README, the Makefile, the schemas and the notebooks' markdown never use "judge" as a verb
  ("judged", "judges") or for a test suite (nor do the tests' own), and say "verdict" only in
  the grade's home or naming it.
- **check** names things only in the rooms that run ``make check`` or read what it came to;
  **report** only what a run writes for a person (the soak's, the bench's, the status
  command's) and pytest's own reports. These two hold for the names the lab and the
  checkpoints give; their prose still uses both words as plain verbs ("checks that...", "a
  child reports"), so it is not read for them.
- A status word (PASSING, FAILED, CHECKED, a checkpoint case's "pass", ...) is written once,
  in ``lucyshop.lab.statuses``; the lab's code says ``Status.PASSING``, never the bare string.
- In the lab, the checkpoints and the tests, a module of the kit is imported under its own
  name, and a name from it too: no ``import ... as`` renames them (a file is named after what
  its importers call it). The runtime's names are the book's.
- The tests swap a module's attribute only through ``monkeypatch`` or ``mock.patch.object``
  (which put it back), never by assigning to it.

Each rule is checked by a function that a planted bad file shows finds what it should.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from pathlib import Path

from lucyshop.lab.statuses import CaseResult, CheckpointStatus, Status, VerdictStatus

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "src" / "lucyshop" / "lab"
_LAB = "src/lucyshop/lab/"
# Each word, and where it may name things (a folder ends in /). judge: the module that is the
# judge; verdict: the grade, whose Verdict it is; check: the rooms that run make check or read
# it (a notebook's check() is one); report: the soak's and the bench's reports, lucyshop
# status's (shown by the lesson), and pytest's, whose hooks the check's plugin implements.
HOMES = {
    "judge": (f"{_LAB}checkpoint/judge.py",),
    "verdict": (f"{_LAB}grade/", f"{_LAB}statuses.py"),
    "check": (
        f"{_LAB}check/",
        f"{_LAB}grade/",
        f"{_LAB}lesson/",
        f"{_LAB}statuses.py",
        f"{_LAB}bench/sections/feedback.py",
    ),
    "report": (
        f"{_LAB}soak/report.py",
        f"{_LAB}soak/__main__.py",
        f"{_LAB}bench/cli.py",
        f"{_LAB}lesson/show.py",
        f"{_LAB}check/plugin/collect.py",
    ),
}
WORDS = {
    "judge": re.compile("judge", re.IGNORECASE),
    "verdict": re.compile("verdict", re.IGNORECASE),
    "check": re.compile("check(?!point)", re.IGNORECASE),
    "report": re.compile("report", re.IGNORECASE),
}
# Names that keep a word in another sense, each for its reason.
KEPT = {
    # the chapter's current-holder check: the book's term, between the check and the write
    ("checkpoints/ch13_worker_recovery.py", "_between_check_and_write"),
    # make check's own sense, in the jail that serves it: a check's start and end in user mode
    (f"{_LAB}sandbox/jail.py", "begin_check"),
    (f"{_LAB}sandbox/jail.py", "end_check"),
}
# The prose that may use a word in its own sense: each home, and the glossary that defines it.
GLOSSARY = "src/lucyshop/lab/__init__.py"
# "judge" as a verb or a suite's name, wherever it is not the judge speaking of itself.
JUDGE_AS_SOMETHING_ELSE = re.compile(
    r"\bjudg(?:es|ed|ing|e?ments?)\b|\b(?:to|not) judge\b|\bjudge (?:whether|what|suite|tests?)\b",
    re.IGNORECASE,
)
# A sentence may point at the verdict's home by its name without using the word.
NAMES_THE_VERDICT = re.compile(r"[\w.]*grade[./]verdict(?:\.py)?\b|`+Verdict(?:Status)?`+")
STATUS_WORDS = {
    str(word) for enum in (Status, CheckpointStatus, VerdictStatus, CaseResult) for word in enum
}
# The rooms whose code reads and writes statuses, and the one exception, which is not a check's.
STATUS_ROOMS = ("check", "checkpoint", "grade", "lesson", "bench")
NOT_A_STATUS = {"grade/gradescope/stockimage.py": {"PASSED", "FAILED"}}  # the image proof's
# Hand-ins that attack the kit: their swaps and aliases are the attack, run in the sandbox.
HAND_INS = ROOT / "tests" / "sandbox" / "hostile"


def code(root: Path) -> list[Path]:
    """The kit's code: ``src/`` and ``checkpoints/``."""
    return sorted([*(root / "src").rglob("*.py"), *(root / "checkpoints").glob("*.py")])


def lab_code(root: Path) -> list[Path]:
    """The lab and the checkpoints, whose words the glossary fixes (the runtime is the book's)."""
    return [
        p for p in code(root) if p.relative_to(root).as_posix().startswith((_LAB, "checkpoints/"))
    ]


def prose_files(root: Path) -> list[Path]:
    """Everything whose prose is read: the code, the README, the Makefile (its help lines are
    printed), the schemas and the notebooks."""
    schemas = sorted((root / _LAB / "schemas").glob("*.json"))
    notebooks = sorted((root / "notebooks").glob("*.ipynb"))
    return [*code(root), root / "README.md", root / "Makefile", *schemas, *notebooks]


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


def stray_names(root: Path, words: tuple[str, ...], paths: list[Path]) -> list[str]:
    """``path:line: name`` for each name in ``paths`` with one of ``words`` in it, outside
    where that word may name things."""
    stray = []
    for path in paths:
        where = path.relative_to(root).as_posix()
        for line, name in named(ast.parse(path.read_text(encoding="utf-8"))):
            for word in words:
                if (
                    WORDS[word].search(name)
                    and not where.startswith(HOMES[word])
                    and (where, name) not in KEPT
                ):
                    stray.append(f"{where}:{line}: {name}")
    return stray


def prose(path: Path) -> list[tuple[str, str]]:
    """``(where, text)`` for each piece of prose in ``path``: a Python file's comments and string
    constants (docstrings, and what it prints or writes, f-strings' text included), by line; a
    notebook's markdown cells, by cell; any other file's lines."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        cells = json.loads(text)["cells"]
        return [
            (f"cell {i}", "".join(c["source"]))
            for i, c in enumerate(cells)
            if c["cell_type"] == "markdown"
        ]
    if path.suffix != ".py":
        return [(f"{i}", line) for i, line in enumerate(text.splitlines(), 1)]
    found = [
        (f"{node.lineno}", node.value)
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    comments = tokenize.generate_tokens(io.StringIO(text).readline)
    found += [(f"{t.start[0]}", t.string) for t in comments if t.type == tokenize.COMMENT]
    return found


def kit_tests(root: Path) -> list[Path]:
    """The tests, but the hostile hand-ins (attacks, not prose) and this file (its plants)."""
    hand_ins = root / HAND_INS.relative_to(ROOT)
    return sorted(
        p
        for p in (root / "tests").rglob("*.py")
        if hand_ins not in p.parents and p.name != Path(__file__).name
    )


def stray_prose(root: Path) -> list[str]:
    """``path:where: '...'`` for each use of judge or verdict in another sense, in prose: judge
    as a verb or a suite's name anywhere but the judge itself (the tests' prose included);
    verdict anywhere but the grade, the statuses and the glossary, unless it names the grade's
    verdict module or class (the tests, which build and read verdicts, are not read for it)."""
    stray = []
    for path in [*prose_files(root), *kit_tests(root)]:
        rel = path.relative_to(root).as_posix()
        for where, text in prose(path):
            own = rel in (*HOMES["judge"], GLOSSARY)
            hits = [] if own else JUDGE_AS_SOMETHING_ELSE.findall(text)
            if not rel.startswith((*HOMES["verdict"], GLOSSARY, "tests/")):
                hits += WORDS["verdict"].findall(NAMES_THE_VERDICT.sub("", text))
            stray += [f"{rel}:{where}: {hit!r}" for hit in hits]
    return stray


# "check" and "report" in prose, outside their homes: only as one of their named uses, each
# defined in the glossary. check: make check (and a run of it, a notebook's check(), the
# lab.check room, its ch13-check schema), the chapter's current-holder check (the book's term,
# also the holder check). A receipt is verified, not checked.
# report: the soak's, the bench's, the similarity and the status reports, and pytest's.
CHECK_USES = re.compile(
    r"make check|\bcheck\(|lab\.check\b|lucyshop\.lab\.check\b|ch13-check|\bcheck\.json\b|"
    r"(?:current-)?holder checks?\b|\bcheck/|\bruff check\b",
    re.IGNORECASE,
)
REPORT_USES = re.compile(
    r"(?:soak|bench|similarity|status|four-signal)(?:'s)? reports?\b|"
    r"pytest(?:'s)? (?:\w+ )?reports?\b|\breport=|\bsoak/report\b|lab\.soak\.report\b|"
    r"--report\b",
    re.IGNORECASE,
)
# The status words a verdict may carry name a check too (``CANNOT CHECK``, ``CHECK ERROR``,
# ``CHECKED``): written in capitals, as the statuses spell them.
CHECK_STATUSES = re.compile(
    "|".join(rf"\b{re.escape(str(word))}\b" for word in VerdictStatus if "CHECK" in word)
    + r"|\bCHECK\s*\("  # and SQL's CHECK constraint
)
# Whole strings that are another program's names, not the kit's prose: a field of the
# runtime's status (the book's), ruff's subcommand, a JupyterLab setting.
NOT_PROSE = {
    "tests/runtime/test_status.py": {"checked"},
    "tests/kit/test_style.py": {"check"},
    "tests/lesson/lab_browser.py": {
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"
    },
}
WORD_ANYWHERE = {
    "check": re.compile(r"\bcheck(?!point|out)\w*", re.IGNORECASE),
    "report": re.compile(r"\breport\w*", re.IGNORECASE),
}
# Where prose may use each word freely: its homes (as for names), the glossary, and the tests
# of those homes.
PROSE_HOMES = {
    "check": (*HOMES["check"], GLOSSARY, "tests/check/", "tests/grading/"),
    "report": (*HOMES["report"], GLOSSARY, "tests/soak/", "tests/bench/"),
}
USES = {"check": CHECK_USES, "report": REPORT_USES}


def check_report_prose_files(root: Path) -> list[Path]:
    """The prose that check and report are read in: the lab's and the checkpoints' code (the
    runtime's words are the book's), the learner's and the reference's files, the README, the
    Makefile, the schemas, the notebooks and the tests."""
    chapter = [*sorted((root / "learner").glob("*.py")), *sorted((root / "solutions").glob("*.py"))]
    rest = [p for p in prose_files(root) if p.suffix != ".py"]
    return [*lab_code(root), *chapter, *rest, *kit_tests(root)]


def makefile_prose(path: Path) -> list[tuple[str, str]]:
    """A Makefile's prose: its comments and targets' help (after ``#``) and what its recipes
    echo. Its rules name the targets, ``make check``'s among them: commands, not prose."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        found += [(f"{number}", part) for part in re.findall(r"#(.*)|\becho\b(.*)", line)[:1]]
    return [(where, "".join(parts)) for where, parts in found]


def stray_check_and_report(root: Path) -> list[str]:
    """``path:where: '...'`` for each "check" or "report" in prose that is none of its named
    uses, outside the word's homes."""
    stray = []
    for path in check_report_prose_files(root):
        rel = path.relative_to(root).as_posix()
        for where, text in makefile_prose(path) if path.name == "Makefile" else prose(path):
            if text in NOT_PROSE.get(rel, ()):
                continue
            for word, uses in USES.items():
                if rel.startswith(PROSE_HOMES[word]):
                    continue
                hits = WORD_ANYWHERE[word].findall(uses.sub("", CHECK_STATUSES.sub("", text)))
                stray += [f"{rel}:{where}: {hit!r}" for hit in hits]
    return stray


def renamed_imports(path: Path) -> list[str]:
    """``file:line: what as other`` for each module or name of the kit (``lucyshop...``)
    imported under another name. ``import a.b.c as c`` keeps the name, so it is not one. A
    notebook is read cell by cell (``file:cell N:line``)."""
    found = []
    for where, source in code_sources(path):
        found += [line.replace(path.name, where, 1) for line in _renamed_in(path.name, source)]
    return found


def code_sources(path: Path) -> list[tuple[str, str]]:
    """``(where, source)``: a Python file whole, a notebook's code cells one by one (a cell
    that is an IPython magic or a shell line is not Python)."""
    if path.suffix != ".ipynb":
        return [(path.name, path.read_text(encoding="utf-8"))]
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [
        (f"{path.name}:cell {i}", "".join(cell["source"]))
        for i, cell in enumerate(cells)
        if cell["cell_type"] == "code"
        and not "".join(cell["source"]).lstrip().startswith(("%", "!"))
    ]


def _renamed_in(name: str, source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lucyshop"):
            found += [
                f"{name}:{node.lineno}: {node.module}.{a.name} as {a.asname}"
                for a in node.names
                if a.asname and a.asname != a.name
            ]
        elif isinstance(node, ast.Import):
            found += [
                f"{name}:{node.lineno}: {a.name} as {a.asname}"
                for a in node.names
                if a.name.startswith("lucyshop") and a.asname not in (None, a.name.split(".")[-1])
            ]
    return found


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
    assert stray_names(ROOT, ("judge", "verdict"), code(ROOT)) == []


def test_judge_and_verdict_each_mean_one_thing_in_prose_and_output():
    assert stray_prose(ROOT) == []


def test_check_and_report_each_name_one_thing_in_the_lab():
    assert stray_names(ROOT, ("check", "report"), lab_code(ROOT)) == []


def test_check_and_report_each_mean_one_thing_in_prose_and_output():
    assert stray_check_and_report(ROOT) == []


def test_no_status_word_is_a_bare_string():
    assert bare_statuses(LAB) == []


def test_every_module_of_the_kit_is_imported_under_its_own_name():
    tests = [p for p in (ROOT / "tests").rglob("*.py") if HAND_INS not in p.parents]
    answers = [*sorted((ROOT / "learner").glob("*.py")), *sorted((ROOT / "solutions").glob("*.py"))]
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    kit = [*lab_code(ROOT), *answers, *notebooks, *sorted(tests)]
    assert [line for path in kit for line in renamed_imports(path)] == []


def test_no_test_swaps_an_attribute_by_hand():
    tests = [p for p in (ROOT / "tests").rglob("*.py") if HAND_INS not in p.parents]
    assert [line for path in sorted(tests) for line in manual_swaps(path)] == []


def test_the_glossary_gives_each_word_its_one_home():
    import lucyshop.lab

    glossary = lucyshop.lab.__doc__
    assert "**judge** (``lab.checkpoint.judge``), and only it" in glossary
    assert "**verdict** (``lab.grade.verdict``), and only it" in glossary
    assert "**check** (``lab.check``)" in glossary and "**current-holder check**" in glossary
    assert "**report**: what a command writes at the end of a run" in glossary
    assert "``lab.statuses``" in glossary


# ---------------------------------------------------------------- each rule fails when broken


def plant(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def test_a_planted_judge_or_verdict_is_found(tmp_path):
    plant(
        tmp_path,
        {
            f"{_LAB}check/engine.py": "def verdict(label):\n    judged = label\n"
            "    return judged\nclass Judge:\n    def run(self, *, verdict_file=None):\n"
            "        self.judge_seconds = 1\nfrom json import loads as judge_loads\n",
            f"{_LAB}grade/verdict.py": "class Verdict:\n    pass\n",  # its home
            f"{_LAB}checkpoint/judge.py": "def judge(): pass\n",  # its home
            "checkpoints/ch13_x.py": "verdicts = []\n",
        },
    )
    assert sorted(stray_names(tmp_path, ("judge", "verdict"), code(tmp_path))) == [
        "checkpoints/ch13_x.py:1: verdicts",
        f"{_LAB}check/engine.py:1: verdict",
        f"{_LAB}check/engine.py:2: judged",
        f"{_LAB}check/engine.py:4: Judge",
        f"{_LAB}check/engine.py:5: verdict_file",
        f"{_LAB}check/engine.py:6: judge_seconds",
        f"{_LAB}check/engine.py:7: judge_loads",
    ]


def test_planted_prose_that_uses_judge_or_verdict_otherwise_is_found(tmp_path):
    notebook = {
        "cells": [
            {"cell_type": "markdown", "source": ["The blocker judges each event; "]},
            {"cell_type": "code", "source": ["x = 'the judged verdict'  # code is not prose\n"]},
            {"cell_type": "markdown", "source": ["the judge reads the files it kept"]},
        ]
    }
    plant(
        tmp_path,
        {
            f"{_LAB}soak/report.py": '"""Every invariant judged."""\n'
            'KEY = "verdicts"  # the soak\'s verdict\n'
            'print(f"{n} cases, the judge\'s reading")\n',
            f"{_LAB}checkpoint/judge.py": '"""The judge: what was judged."""\n',  # its own
            f"{_LAB}grade/verdict.py": '"""One verdict per check."""\n',  # its home
            f"{_LAB}check/results.py": '"""Read back by ``lucyshop.lab.grade.verdict``."""\n',
            "README.md": "the judge suite (`tests/sandbox/`)\nnot to judge what a reply says\n",
            "Makefile": "grade: ## a Verdict for each hand-in\n",
            "notebooks/13x.ipynb": json.dumps(notebook),
            "tests/soak/test_x.py": '"""Each invariant, judged; its verdict read."""\n',
            "tests/sandbox/hostile/forge.py": '"""Judged by nobody: an attack."""\n',
        },
    )
    assert sorted(stray_prose(tmp_path)) == sorted(
        [
            f"{_LAB}soak/report.py:1: 'judged'",
            f"{_LAB}soak/report.py:2: 'verdict'",
            f"{_LAB}soak/report.py:2: 'verdict'",
            "README.md:1: 'judge suite'",
            "README.md:2: 'to judge'",
            "Makefile:1: 'Verdict'",
            "notebooks/13x.ipynb:cell 0: 'judges'",
            "tests/soak/test_x.py:1: 'judged'",
        ]
    )


def test_a_planted_check_or_report_is_found(tmp_path):
    plant(
        tmp_path,
        {
            f"{_LAB}checkpoint/expect.py": "class CheckFailed(Exception):\n    pass\n"
            "def refused(report): return report\n",
            f"{_LAB}check/engine.py": "def run_check(): pass\n",  # its home
            f"{_LAB}soak/report.py": "def write_report(): pass\n",  # its home
            f"{_LAB}grade/rubric.py": "checkpoint_cases = 7\n",  # a checkpoint is no check
            "checkpoints/ch13_worker_recovery.py": "def _between_check_and_write(): pass\n"
            "reported = 1\n",
            "src/lucyshop/store.py": "def check(): pass\n",  # the runtime keeps its words
        },
    )
    assert sorted(stray_names(tmp_path, ("check", "report"), lab_code(tmp_path))) == [
        "checkpoints/ch13_worker_recovery.py:2: reported",
        f"{_LAB}checkpoint/expect.py:1: CheckFailed",
        f"{_LAB}checkpoint/expect.py:3: report",
    ]


def test_a_planted_import_under_another_name_is_found(tmp_path):
    bad = tmp_path / "shop.py"
    bad.write_text(
        "import matplotlib.pyplot as plt\n"  # not the kit's
        "import lucyshop.lab.loader as loader\n"  # its own name
        "import lucyshop.lab.loader as blocker\n"
        "from lucyshop.lab.grade.similar import fingerprints as similarity\n"
        "from lucyshop.lab.sandbox.relay import INSIDE as RELAY_INSIDE, NAME\n"
        "from lucyshop.lab.given import exercise_kit\n",
        encoding="utf-8",
    )
    assert renamed_imports(bad) == [
        "shop.py:3: lucyshop.lab.loader as blocker",
        "shop.py:4: lucyshop.lab.grade.similar.fingerprints as similarity",
        "shop.py:5: lucyshop.lab.sandbox.relay.INSIDE as RELAY_INSIDE",
    ]


def test_a_planted_import_under_another_name_in_a_notebook_is_found(tmp_path):
    cells = [
        {"cell_type": "markdown", "source": ["from lucyshop.lab.lesson import show as lesson"]},
        {"cell_type": "code", "source": ["%matplotlib inline"]},
        {"cell_type": "code", "source": ["import matplotlib.pyplot as plt\n"]},
        {
            "cell_type": "code",
            "source": ["x = 1\n", "from lucyshop.lab.lesson import show as lesson"],
        },
    ]
    notebook = tmp_path / "13x.ipynb"
    notebook.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert renamed_imports(notebook) == ["13x.ipynb:cell 3:2: lucyshop.lab.lesson.show as lesson"]


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


def test_planted_prose_that_uses_check_or_report_otherwise_is_found(tmp_path):
    notebook = {
        "cells": [
            {"cell_type": "markdown", "source": ['Run `make check`, then check("claim").']},
            {"cell_type": "markdown", "source": ["The worker checks its lease and reports it."]},
            {"cell_type": "code", "source": ["# code cells are not prose: check this\n"]},
        ]
    }
    plant(
        tmp_path,
        {
            f"{_LAB}checkpoint/judge.py": '"""Checks each kept file; the holder check holds."""\n'
            'print("reported twice")  # a status report, in lab.soak.report\n',
            f"{_LAB}check/engine.py": '"""A check of one file: checks anything, reports."""\n',
            f"{_LAB}soak/report.py": '"""The report; it checks every invariant."""\n',
            f"{_LAB}schemas/check.json": '{"$id": "check.json", "description": "checked"}\n',
            "README.md": "CANNOT CHECK is a status; the receipt check FILE command\n",
            "Makefile": "check: x ## test your file\n\t@echo checking\n# a report\n",
            "learner/exercises.py": '"""Verify FILE; --report FILE, report= entries."""\n',
            "notebooks/13x.ipynb": json.dumps(notebook),
            "tests/soak/test_x.py": '"""Each invariant checked; its report read."""\n',
            "tests/check/test_y.py": '"""A check reported by pytest\'s reports."""\n',
        },
    )
    assert sorted(stray_check_and_report(tmp_path)) == sorted(
        [
            f"{_LAB}checkpoint/judge.py:1: 'Checks'",
            f"{_LAB}checkpoint/judge.py:2: 'reported'",
            f"{_LAB}soak/report.py:1: 'checks'",
            f"{_LAB}check/engine.py:1: 'reports'",
            f"{_LAB}schemas/check.json:1: 'checked'",
            "README.md:1: 'check'",
            "Makefile:2: 'checking'",
            "Makefile:3: 'report'",
            "notebooks/13x.ipynb:cell 1: 'checks'",
            "notebooks/13x.ipynb:cell 1: 'reports'",
            "tests/soak/test_x.py:1: 'checked'",
            "tests/check/test_y.py:1: 'reported'",
        ]
    )
