"""Layers run one way: the runtime never imports the lab, and nothing under ``src/`` loads the
reference.

The runtime is every module of ``lucyshop`` outside ``lucyshop.lab`` (store, queue, proposal,
approval, the supplier's server and client, models, status, validate, the ``python -m
lucyshop`` command). The lab may use the runtime; the runtime may not use the lab, or a student
could not run the shop without the grading machinery. And code under ``src/`` chooses an
implementation only when told to: a hard-coded load of ``solutions``, or a command line or
function that falls back to it, would run the reference where a student's file was meant.

Both rules are read from the source with ``ast``, so an import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "lucyshop"
LAB = PACKAGE / "lab"
RUNTIME = sorted(p for p in PACKAGE.rglob("*.py") if LAB not in p.parents)
EVERYTHING = sorted(SRC.rglob("*.py"))
LOADERS = {"load_impl", "impl_path", "block_for"}


def name(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def module_of(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, module: str) -> list[str]:
    """Every module that ``path`` (the module ``module``) imports, relative imports resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module.split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found += [module] + [f"{module}.{alias.name}" for alias in node.names]
    return found


def reference_loads(path: Path) -> list[str]:
    """Each place ``path`` names the reference as code to run: an import of ``solutions``, or
    ``load_impl("solutions")`` and its kin with the literal name or a path into it."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            modules += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [
                f"line {node.lineno}: import {m}" for m in modules if m.split(".")[0] == "solutions"
            ]
        elif isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else None
            callee = node.func.id if isinstance(node.func, ast.Name) else callee
            literals = [a.value for a in node.args if isinstance(a, ast.Constant)]
            if callee in LOADERS and any(map(names_the_reference, literals)):
                found.append(f"line {node.lineno}: {callee}({literals[0]!r})")
            found += [
                f"line {node.lineno}: {callee}(..., default={k.value.value!r})"
                for k in node.keywords
                if k.arg == "default" and names_the_reference(getattr(k.value, "value", None))
            ]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defaults = [*node.args.defaults, *filter(None, node.args.kw_defaults)]
            found += [
                f"line {node.lineno}: def {node.name}(... = {d.value!r})"
                for d in defaults
                if names_the_reference(getattr(d, "value", None))
            ]
    return found


def names_the_reference(value: object) -> bool:
    return isinstance(value, str) and value.split("/")[0] == "solutions"


def test_the_runtime_is_every_module_outside_the_lab():
    names = {name(p) for p in RUNTIME}
    assert {
        "lucyshop/__main__.py",
        "lucyshop/status.py",
        "lucyshop/store.py",
        "lucyshop/supplier/server.py",
        "lucyshop/supplier/client.py",
        "lucyshop/validate.py",
    } <= names
    assert not any(n.startswith("lucyshop/lab/") for n in names)


@pytest.mark.parametrize("path", RUNTIME, ids=name)
def test_the_runtime_never_imports_the_lab(path):
    lab = [
        m
        for m in imported(path, module_of(path))
        if m == "lucyshop.lab" or m.startswith("lucyshop.lab.")
    ]
    assert lab == [], f"{name(path)} imports the lab: {sorted(set(lab))}"


@pytest.mark.parametrize("path", EVERYTHING, ids=name)
def test_nothing_under_src_loads_the_reference(path):
    assert reference_loads(path) == [], f"{name(path)} loads the reference"


def test_the_checks_see_what_they_look_for(tmp_path):
    """Each rule finds a planted offence: the checks are not vacuous."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from .lab import loader\n"
        "def f():\n"
        "    import lucyshop.lab.processes\n"
        "    return loader.load_impl('solutions'), load_impl('solutions/ch13_leases.py')\n"
        "def g(spec='solutions', *, impl='solutions'):\n"
        "    parser.add_argument('--impl', default='solutions')\n"
    )
    modules = imported(planted, "lucyshop.planted")
    assert "lucyshop.lab" in modules and "lucyshop.lab.processes" in modules
    assert len(reference_loads(planted)) == 5
