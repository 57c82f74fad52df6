"""The stubs and the reference have one shape: same names, signatures, docstrings and fields.

Read as source (``ast``), never imported, so this holds whatever the bodies do. Every public
learner function is its docstring and exactly ``raise NotStarted("<name>", "13a|13b § ...")``,
except the chapter's ready-made parts (``WRITTEN``), which arrive written: the learner suite
runs them (their rows of ``make check`` pass on the file as shipped).
"""

from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The chapter's ready-made parts: written in the learner's file, not stubs (with LEASE_MIGRATIONS).
WRITTEN = ("open_worker_shop", "Claim.worker_id", "enqueue")
LEARNER = ROOT / "learner" / "ch13_leases.py"
SOLUTIONS = ROOT / "solutions" / "ch13_leases.py"


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def public(tree: ast.Module) -> dict[str, ast.AST]:
    """Public top-level functions and classes, in file order."""
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and not node.name.startswith("_")
    }


def functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """Every public function and method, qualified (``Claim.worker_id``), in file order."""
    found = {}
    for name, node in public(tree).items():
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                    found[f"{name}.{item.name}"] = item
        else:
            found[name] = node
    return found


def signature(node: ast.FunctionDef) -> dict[str, object]:
    return {
        "async": isinstance(node, ast.AsyncFunctionDef),
        "args": ast.unparse(node.args),
        "returns": ast.unparse(node.returns) if node.returns else None,
        "decorators": [ast.unparse(d) for d in node.decorator_list],
    }


def fields(node: ast.ClassDef) -> list[tuple[str, str, str | None]]:
    return [
        (
            ast.unparse(item.target),
            ast.unparse(item.annotation),
            ast.unparse(item.value) if item.value else None,
        )
        for item in node.body
        if isinstance(item, ast.AnnAssign)
    ]


LEARNER_TREE = parse(LEARNER)
SOLUTIONS_TREE = parse(SOLUTIONS)
LEARNER_FUNCTIONS = functions(LEARNER_TREE)
SOLUTIONS_FUNCTIONS = functions(SOLUTIONS_TREE)


def test_the_same_public_functions_and_classes_in_the_same_order():
    assert list(public(LEARNER_TREE)) == list(public(SOLUTIONS_TREE))
    assert list(LEARNER_FUNCTIONS) == list(SOLUTIONS_FUNCTIONS)


@pytest.mark.parametrize("name", list(SOLUTIONS_FUNCTIONS))
def test_each_signature_is_identical(name):
    assert name in LEARNER_FUNCTIONS, f"learner/ch13_leases.py lacks {name}"
    assert signature(LEARNER_FUNCTIONS[name]) == signature(SOLUTIONS_FUNCTIONS[name])


@pytest.mark.parametrize("name", list(SOLUTIONS_FUNCTIONS))
def test_each_docstring_is_identical(name):
    learner = ast.get_docstring(LEARNER_FUNCTIONS[name], clean=False)
    assert learner, f"the stub of {name} has no docstring"
    assert learner == ast.get_docstring(SOLUTIONS_FUNCTIONS[name], clean=False)


@pytest.mark.parametrize("name", ["Claim"])
def test_the_dataclasses_are_identical(name):
    learner, reference = public(LEARNER_TREE)[name], public(SOLUTIONS_TREE)[name]
    assert fields(learner) == fields(reference)
    assert [ast.unparse(d) for d in learner.decorator_list] == [
        ast.unparse(d) for d in reference.decorator_list
    ]
    assert ast.get_docstring(learner, clean=False) == ast.get_docstring(reference, clean=False)
    assert [ast.unparse(b) for b in learner.bases] == [ast.unparse(b) for b in reference.bases]


def constants(tree: ast.Module) -> dict[str, tuple[str | None, ast.expr]]:
    """The public module-level constants: each name's annotation and value."""
    found = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            found[node.targets[0].id] = (None, node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found[node.target.id] = (ast.unparse(node.annotation), node.value)
    return {k: v for k, v in found.items() if not k.startswith("_")}


LEARNER_CONSTANTS = constants(LEARNER_TREE)
REFERENCE_CONSTANTS = constants(SOLUTIONS_TREE)


def test_the_public_constants_match_except_the_migrations():
    assert set(LEARNER_CONSTANTS) == set(REFERENCE_CONSTANTS)
    for name in set(REFERENCE_CONSTANTS) - {"LEASE_MIGRATIONS"}:
        learner, reference = LEARNER_CONSTANTS[name], REFERENCE_CONSTANTS[name]
        assert (learner[0], ast.unparse(learner[1])) == (reference[0], ast.unparse(reference[1]))


def lease_schema(statements: tuple[str, ...]) -> dict[str, list[tuple]]:
    """The lease tables that ``statements`` build on chapter 11's lease table."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute(
            "CREATE TABLE assignment_leases(work_id INTEGER PRIMARY KEY, worker_id TEXT NOT NULL,"
            " expires REAL NOT NULL)"
        )
        for statement in statements:
            db.execute(statement)
        return {
            table: db.execute(f"PRAGMA table_info({table})").fetchall()
            for table in ("assignment_leases", "transcript", "outcomes")
        } | {"checks": [row[0] for row in db.execute("SELECT sql FROM sqlite_master")]}
    finally:
        db.close()


def test_the_learner_migrations_are_the_books_version_1_alone():
    """The learner's file arrives with version 1, which builds the reference's version 1
    schema (the same columns, types, keys and status check); version 2, the reference's index,
    is beyond the book and left to the student."""
    learner, reference = (
        LEARNER_CONSTANTS["LEASE_MIGRATIONS"],
        REFERENCE_CONSTANTS["LEASE_MIGRATIONS"],
    )
    assert learner[0] == reference[0], "the same annotation"
    learner_versions = ast.literal_eval(learner[1])
    reference_versions = ast.literal_eval(reference[1])
    assert list(learner_versions) == [1] and sorted(reference_versions) == [1, 2]
    learner_schema = lease_schema(learner_versions[1])
    reference_schema = lease_schema(reference_versions[1])
    assert {k: v for k, v in learner_schema.items() if k != "checks"} == {
        k: v for k, v in reference_schema.items() if k != "checks"
    }
    assert all(
        "CHECK (status IN ('DONE', 'BLOCKED', 'CANCELED'))" in " ".join(sql.split())
        for sql in learner_schema["checks"]
        if "outcomes" in sql
    ), learner_schema["checks"]


@pytest.mark.parametrize("name", WRITTEN)
def test_the_ready_made_parts_arrive_written(name):
    assert name in LEARNER_FUNCTIONS, f"learner/ch13_leases.py lacks {name}"
    body = LEARNER_FUNCTIONS[name].body[1:]
    assert body and not any(
        isinstance(node, ast.Name) and node.id == "NotStarted"
        for statement in body
        for node in ast.walk(statement)
    ), f"{name} arrives written, as the chapter gives it: {[ast.unparse(s) for s in body]}"


@pytest.mark.parametrize("name", [n for n in SOLUTIONS_FUNCTIONS if n not in WRITTEN])
def test_each_stub_is_its_docstring_and_one_raise_not_started(name):
    node = LEARNER_FUNCTIONS[name]
    body = node.body[1:]  # after the docstring
    assert len(body) == 1 and isinstance(body[0], ast.Raise), (
        f"the stub of {name} is its docstring and one raise, got {[ast.unparse(s) for s in body]}"
    )
    raised = body[0]
    assert raised.cause is None
    call = raised.exc
    assert isinstance(call, ast.Call) and ast.unparse(call.func) == "NotStarted", ast.unparse(
        raised
    )
    assert not call.keywords and len(call.args) == 2, ast.unparse(call)
    assert all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args)
    function, section = (a.value for a in call.args)
    assert function == name, f"the stub of {name} names {function!r}"
    assert section.startswith(("13a § ", "13b § ")) and len(section) > len("13a § "), section


def test_part_a_stubs_point_to_13a_and_part_b_stubs_to_13b():
    sections = {
        name: node.body[1].exc.args[1].value
        for name, node in LEARNER_FUNCTIONS.items()
        if name not in WRITTEN
    }
    names = list(sections)
    split = names.index("claim")
    assert all(sections[n].startswith("13a") for n in names[:split]), sections
    assert all(sections[n].startswith("13b") for n in names[split:]), sections


def test_notstarted_comes_from_the_lab_and_the_learner_never_imports_solutions():
    imports = []
    for node in ast.walk(LEARNER_TREE):
        if isinstance(node, ast.Import):
            imports += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            imports.append(node.module or "")
            if node.module == "lucyshop.lab":
                assert [a.name for a in node.names] == ["NotStarted"]
    assert not [m for m in imports if m == "solutions" or m.startswith("solutions.")], imports
    assert "lucyshop.lab" in imports, "the stubs raise lucyshop.lab.NotStarted"
    names = {n.id for n in ast.walk(LEARNER_TREE) if isinstance(n, ast.Name)}
    assert not names & {"solutions", "__import__", "importlib", "runpy"}, names & {"solutions"}
    strings = [
        n.value
        for n in ast.walk(LEARNER_TREE)
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    assert not [s for s in strings if "solutions/" in s or s.startswith("solutions.")]


def test_the_report_lists_every_function_in_file_order():
    from lucyshop.lab.check.subjects import BEYOND, FUNCTIONS

    assert list(FUNCTIONS) == list(LEARNER_FUNCTIONS)
    for name in FUNCTIONS:
        module = ROOT / "spec" / "learner" / f"test_{name.rpartition('.')[2]}.py"
        assert module.is_file(), f"{name} has no test module {module.name}"
    for row in BEYOND:
        assert "beyond the book" in row.label and set(row.stubs) <= set(FUNCTIONS), row
        for module in row.modules:
            assert (ROOT / row.directory / f"{module}.py").is_file(), (row.label, module)


EXERCISE_LEARNER = functions(parse(ROOT / "learner" / "exercises.py"))
EXERCISE_ANSWERS = functions(parse(ROOT / "solutions" / "exercises.py"))
EXERCISE_STUBS = {  # the learner's exercise functions that are stubs (the rest is given code)
    name: node
    for name, node in EXERCISE_LEARNER.items()
    if any(isinstance(n, ast.Raise) and "NotStarted" in ast.unparse(n) for n in node.body)
}


def test_the_worked_answers_are_at_most_800_lines():
    """Solutions 13 holds answers; the measurement harness lives in the lab."""
    lines = (ROOT / "solutions" / "exercises.py").read_text(encoding="utf-8").count("\n")
    assert lines <= 800, f"solutions/exercises.py has {lines} lines"


def test_every_exercise_stub_has_an_answer_in_the_same_order():
    assert len(EXERCISE_STUBS) >= 8
    assert [n for n in EXERCISE_ANSWERS if n in EXERCISE_STUBS] == list(EXERCISE_STUBS)


@pytest.mark.parametrize("name", list(EXERCISE_STUBS))
def test_each_exercise_stub_keeps_its_answers_signature(name):
    assert signature(EXERCISE_STUBS[name]) == signature(EXERCISE_ANSWERS[name])


@pytest.mark.parametrize("name", list(EXERCISE_STUBS))
def test_each_exercise_stub_keeps_the_answers_docstring_up_to_its_explanation(name):
    """The answer's docstring ends with 'What it shows:'; the stub's asks for the student's own
    words."""
    answer = ast.get_docstring(EXERCISE_ANSWERS[name], clean=False) or ""
    stub = ast.get_docstring(EXERCISE_STUBS[name], clean=False) or ""
    assert (
        stub.split("Explain in your own words")[0].rstrip()
        == answer.split("What it shows:")[0].rstrip()
    )


PG_LEARNER = functions(parse(ROOT / "learner" / "ch13_postgres.py"))
PG_SOLUTIONS = functions(parse(ROOT / "solutions" / "ch13_postgres.py"))


@pytest.mark.parametrize("name", list(PG_SOLUTIONS))
def test_exercise_7_stubs_keep_the_references_shape(name):
    """learner/ch13_postgres.py and its reference: same functions, signatures and docstrings;
    each stub is its docstring and one ``raise NotStarted(name, "13d § ...")``."""
    assert list(PG_LEARNER) == list(PG_SOLUTIONS)
    stub, answer = PG_LEARNER[name], PG_SOLUTIONS[name]
    assert signature(stub) == signature(answer)
    assert ast.get_docstring(stub, clean=False) == ast.get_docstring(answer, clean=False)
    assert len(stub.body) == 2 and isinstance(stub.body[1], ast.Raise), ast.unparse(stub)
    call = stub.body[1].exc
    assert ast.unparse(call.func) == "NotStarted" and call.args[0].value == name
    assert call.args[1].value.startswith("13d § ")


def lab_imports(path: Path) -> set[str]:
    """The lab's rooms (``lucyshop.lab.<room>``) that ``path`` imports from."""
    return {
        ".".join(node.module.split(".")[:3])
        for node in ast.walk(parse(path))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lucyshop.lab")
    }


def test_the_answers_take_what_they_are_given_from_one_room():
    """What an answer may use comes from ``lucyshop.lab.given``; the measuring of exercises 5
    and 6 (``lucyshop.lab.exercises``) is the only other room either file names."""
    for name in ("learner", "solutions"):
        assert lab_imports(ROOT / name / "exercises.py") == {
            "lucyshop.lab.given",
            "lucyshop.lab.exercises",
        }, name
