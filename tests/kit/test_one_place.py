"""What the kit shares is stated once: the variable that names the chapter file (read from the
source text of ``src/`` and ``checkpoints/``), and the writer that makes a file appear whole
(ruff's banned-api rule). Each rule also proves that it would find a second statement.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = sorted([*(ROOT / "src").rglob("*.py"), *(ROOT / "checkpoints").glob("*.py")])


def stating(text: str, files: list[Path] = CODE) -> list[str]:
    """The files (relative to the repository) whose source contains ``text``."""
    return [path.relative_to(ROOT).as_posix() for path in files if text in path.read_text()]


def test_the_implementation_variable_is_spelled_only_in_the_runtime_package() -> None:
    """Everyone else says ``lucyshop.IMPL_ENV`` (the lab's ``loader.ENV``)."""
    assert stating('"LEASES_IMPL"') == ["src/lucyshop/__init__.py"]


def test_a_second_statement_would_be_found() -> None:
    planted = Path(__file__)  # this file states it, as a module might
    assert "tests/kit/test_one_place.py" in stating('"LEASES_IMPL"', [*CODE, planted])


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
    ``$LEASES_IMPL`` (``environ.get(ENV)``, ``environ[ENV]``, ``getenv``), or an ``--impl``
    option with a default of its own. ``lucyshop.chosen_impl`` reads the variable, and
    ``loader.add_impl_option`` gives ``--impl`` its default from it."""
    tree = ast.parse(source)
    loaders_env = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "lucyshop.lab.loader"
        and "ENV" in [alias.name for alias in node.names]
        for node in ast.walk(tree)
    )
    names = {"IMPL_ENV", "loader.ENV", "'LEASES_IMPL'"} | ({"ENV"} if loaders_env else set())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            first = ast.unparse(node.args[0]) if node.args else ""
            if node.func.attr in ("get", "getenv") and first in names:
                found.append(node.lineno)
            elif node.func.attr in ("add_argument", "addoption") and first == "'--impl'":
                found += [node.lineno for k in node.keywords if k.arg == "default"]
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and ast.unparse(node.slice) in names
        ):
            found.append(node.lineno)
    return sorted(found)


def test_which_chapter_file_is_meant_is_decided_in_one_place() -> None:
    """``--impl``, else ``$LEASES_IMPL``, else the learner's: one rule, in ``chosen_impl``."""
    found = {
        path.relative_to(ROOT).as_posix()
        for path in [*CODE, ROOT / "tests" / "conftest.py"]
        if impl_resolvers(path.read_text(encoding="utf-8"))
    }
    assert found == {"src/lucyshop/__init__.py", "src/lucyshop/lab/loader.py"}


def test_a_second_resolver_would_be_found() -> None:
    planted = """
from lucyshop.lab.loader import ENV
spec = args.impl or os.environ.get(ENV) or "learner"
parser.add_argument("--impl", default="learner")
impl = os.environ[loader.ENV]
group.addoption("--impl", help="which file")
"""
    assert impl_resolvers(planted) == [3, 4, 5]
