"""What the kit shares is stated once: the variable that names the chapter file and the rule
that reads it (read from the source text of the whole kit), and the writer that makes a file
appear whole (ruff's banned-api rule). Each rule also proves that it would find a second
statement.
"""

from __future__ import annotations

import ast
from pathlib import Path

from lucyshop import IMPL_ENV

ROOT = Path(__file__).resolve().parents[2]
CODE = sorted([*(ROOT / "src").rglob("*.py"), *(ROOT / "checkpoints").glob("*.py")])
KIT = sorted(
    p
    for d in ("src", "checkpoints", "tests", "learner", "solutions")
    for p in (ROOT / d).rglob("*.py")
)
# What runs a test rather than being one: tests/' conftests and helper modules.
MACHINERY = CODE + [
    p for p in KIT if p.relative_to(ROOT).parts[0] == "tests" and not p.name.startswith("test_")
]

SPELLED = f'"{IMPL_ENV}"'  # the variable's name as a string in the source


def test_the_implementation_variable_is_spelled_only_in_the_runtime_package() -> None:
    """Everyone else, tests too, says ``lucyshop.IMPL_ENV``."""
    spelled = [p.relative_to(ROOT).as_posix() for p in KIT if SPELLED in p.read_text()]
    assert spelled == ["src/lucyshop/__init__.py"]


def other_names(source: str) -> list[int]:
    """Lines of ``source`` that give the variable a second name: ``X = IMPL_ENV`` (the lab's
    old ``loader.ENV``) or ``import IMPL_ENV as X``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        renamed = isinstance(node, ast.Assign) and ast.unparse(node.value).endswith("IMPL_ENV")
        aliased = isinstance(node, ast.ImportFrom) and any(
            a.name == "IMPL_ENV" and a.asname for a in node.names
        )
        if renamed or aliased:
            found.append(node.lineno)
    return found


def test_the_implementation_variable_has_one_name() -> None:
    found = {
        path.relative_to(ROOT).as_posix(): lines
        for path in KIT
        if (lines := other_names(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_a_second_name_would_be_found() -> None:
    planted = """
from lucyshop import IMPL_ENV as VARIABLE
ENV = IMPL_ENV
NAME = lucyshop.IMPL_ENV
os.environ[IMPL_ENV] = "learner"
"""
    assert other_names(planted) == [2, 3, 4]


def state_readers(source: str) -> list[str]:
    """The functions in ``source`` that read a pid's state (``Process(pid).status()``)."""
    return [
        node.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef)
        and any(
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "status"
            and isinstance(call.func.value, ast.Call)
            and ast.unparse(call.func.value.func).endswith("Process")
            for call in ast.walk(node)
        )
    ]


def test_process_liveness_is_decided_in_one_place() -> None:
    """Whether a pid runs is ``pid_alive`` (the runtime's, which ``lucy status`` asks too) and
    whether it is paused is ``is_stopped``: a second reader would drift (a zombie counted as
    alive, a vanished pid raising)."""
    found = {
        f"{path.relative_to(ROOT).as_posix()}: {name}"
        for path in CODE
        for name in state_readers(path.read_text(encoding="utf-8"))
    }
    assert found == {
        "src/lucyshop/status/signals.py: pid_alive",
        "src/lucyshop/lab/services/processes.py: is_stopped",
    }


def test_a_second_liveness_test_would_be_found() -> None:
    planted = "def stopped(pid):\n    return psutil.Process(pid).status() == STOPPED\n"
    assert state_readers(planted) == ["stopped"]


def safe_lease_copies(source: str) -> list[int]:
    """Lines of ``source`` that state the safe-lease factor: the longest turn
    (``percentile(turns, 100)``) times anything but ``SAFE_LEASE_FACTOR``, or an assignment
    to ``SAFE_LEASE_FACTOR``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            sides = (node.left, node.right)
            if "SAFE_LEASE_FACTOR" not in map(ast.unparse, sides) and any(
                isinstance(s, ast.Call)
                and ast.unparse(s.func).endswith("percentile")
                and len(s.args) == 2
                and ast.unparse(s.args[1]) == "100"
                for s in sides
            ):
                found.append(node.lineno)
        elif isinstance(node, ast.Assign) and "SAFE_LEASE_FACTOR" in map(ast.unparse, node.targets):
            found.append(node.lineno)
    return found


def test_the_safe_lease_factor_is_stated_once() -> None:
    """Part A's third rule, exercise 5's bound and its safe lease without renewal are one
    factor, in ``lucyshop.lab.experiment.receipt``."""
    found = {
        path.relative_to(ROOT).as_posix(): lines
        for path in [*CODE, *(ROOT / "solutions").glob("*.py")]
        if (lines := safe_lease_copies(path.read_text(encoding="utf-8")))
    }
    assert list(found) == ["src/lucyshop/lab/experiment/receipt.py"], found
    assert len(found["src/lucyshop/lab/experiment/receipt.py"]) == 1


def test_a_second_safe_lease_factor_would_be_found() -> None:
    planted = (
        "safe = 2 * leases.percentile(turns, 100)\nbound = leases.percentile(t, 100) * BOUND\n"
    )
    assert safe_lease_copies(planted) == [1, 2]


def impl_resolvers(source: str) -> list[int]:
    """Lines of ``source`` that decide which chapter file is meant on their own: a read of
    ``$LEASES_IMPL`` (``environ.get(IMPL_ENV)``, ``environ[IMPL_ENV]``, ``getenv``), an
    ``--impl`` option with a default of its own, or a name looked up among ``IMPLEMENTATIONS``
    (``learner``, ``solutions``). ``lucyshop.chosen_impl`` reads the variable,
    ``loader.add_impl_option`` gives ``--impl`` its default from it, and ``loader.impl_path``
    turns what was chosen into the chapter file."""
    names = {"IMPL_ENV", "lucyshop.IMPL_ENV", repr(IMPL_ENV)}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            first = ast.unparse(node.args[0]) if node.args else ""
            reads = node.func.attr in ("get", "getenv") and first in names
            looks_up = node.func.attr == "get" and ast.unparse(node.func.value) == "IMPLEMENTATIONS"
            if reads or looks_up:
                found.append(node.lineno)
            elif node.func.attr in ("add_argument", "addoption") and first == "'--impl'":
                found += [node.lineno for k in node.keywords if k.arg == "default"]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            looked_up = ast.unparse(node.value) == "IMPLEMENTATIONS"
            if ast.unparse(node.slice) in names or (
                looked_up and not isinstance(node.slice, ast.Constant)
            ):
                found.append(node.lineno)
        elif isinstance(node, ast.Compare) and "IMPLEMENTATIONS" in map(
            ast.unparse, node.comparators
        ):
            found.append(node.lineno)
    return sorted(set(found))


def test_which_chapter_file_is_meant_is_decided_in_one_place() -> None:
    """``--impl``, else ``$LEASES_IMPL``, else the learner's: one rule, in ``chosen_impl``, and
    one way from that to a file, ``impl_path`` (the code and tests/' machinery; a test may read
    an environment it was handed)."""
    found = {
        path.relative_to(ROOT).as_posix()
        for path in MACHINERY
        if impl_resolvers(path.read_text(encoding="utf-8"))
    }
    assert found == {"src/lucyshop/__init__.py", "src/lucyshop/lab/loader.py"}


def test_a_second_resolver_would_be_found() -> None:
    planted = """
spec = args.impl or os.environ.get(IMPL_ENV) or "learner"
parser.add_argument("--impl", default="learner")
impl = os.environ[lucyshop.IMPL_ENV]
group.addoption("--impl", help="which file")
path = IMPLEMENTATIONS[spec] if spec in IMPLEMENTATIONS else Path(spec)
path = IMPLEMENTATIONS.get(spec, spec)
solutions = IMPLEMENTATIONS["solutions"].parent
"""
    assert impl_resolvers(planted) == [2, 3, 4, 6, 7]


def result_line_formatters(source: str) -> list[int]:
    """Lines of ``source`` with an f-string that formats a printed result line itself (what
    ``lucyshop.lab.statuses.result_line`` is for): literal text with a mark and two spaces
    (``f"FAIL  {name}: {why}"``), or a line that opens with a value, two spaces and a value
    (``f"{mark}  {name}"``, indented or not)."""
    marked = ("PASS  ", "FAIL  ", "NOT STARTED  ")
    found = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.JoinedStr):
            continue
        parts = node.values
        literal = any(
            isinstance(part, ast.Constant) and part.value.lstrip(" ").startswith(marked)
            for part in parts
        )
        if parts and isinstance(parts[0], ast.Constant) and not parts[0].value.strip(" "):
            parts = parts[1:]  # the indent
        kinds = [type(part) for part in parts[:3]]
        spaced = kinds == [ast.FormattedValue, ast.Constant, ast.FormattedValue]
        if literal or (spaced and parts[1].value == "  "):
            found.add(node.lineno)
    return sorted(found)


def test_a_result_line_is_formatted_in_one_place() -> None:
    """Checkpoint cases, soak invariants, receipt and exercise tests all print their ``PASS``,
    ``FAIL`` or ``NOT STARTED`` line through ``statuses.result_line``."""
    found = {
        path.relative_to(ROOT).as_posix(): lines
        for path in CODE
        if (lines := result_line_formatters(path.read_text(encoding="utf-8")))
    }
    assert list(found) == ["src/lucyshop/lab/statuses.py"], found
    assert len(found["src/lucyshop/lab/statuses.py"]) == 1, found


def test_a_second_result_line_formatter_would_be_found() -> None:
    planted = """
print(f"FAIL  {number} {name}: {why}")
line = f"NOT STARTED  exercise {n}: {stub}"
shown = f"{'PASS' if ok else 'FAIL'}  {name}: {detail}"
table = f"  {mark}  {case.case} {case.name}: {case.message}"
row = f"{label}: {status} ({passed}/{total} tests)"
"""
    assert result_line_formatters(planted) == [2, 3, 4, 5]


STUDENT_FILE_NAMES = {"ch13_leases.py", "exercises.py", "ch13_postgres.py"}
# Where a student file's name may still be written out: its home, and two files whose sources
# receipts pin (the Part A drivers, the Gradescope image proof), re-measured only with time.
NAMED_AT_HOME = {
    "src/lucyshop/lab/loader.py",
    "src/lucyshop/lab/experiment/sandboxed.py",
    "src/lucyshop/lab/grade/gradescope/stockimage.py",
}


def file_names_written(source: str) -> list[int]:
    """Lines of ``source`` with a string that is exactly a student file's name."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and node.value in STUDENT_FILE_NAMES
    ]


def test_the_student_files_names_are_written_in_the_loader_alone() -> None:
    """``loader.CHAPTER``, ``EXERCISES``, ``PG_FILE`` (and ``STUDENT_FILES``): the kit's code
    names a student's file through them."""
    found = {
        where: lines
        for path in CODE
        if (where := path.relative_to(ROOT).as_posix()) not in NAMED_AT_HOME
        and (lines := file_names_written(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_a_student_files_name_written_again_would_be_found() -> None:
    assert file_names_written('PG = "ch13_postgres.py"\nDOC = "see exercises.py"\n') == [1]
