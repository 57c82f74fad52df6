"""Layers run one way: the runtime never imports the lab or the proof, the lab never imports the
proof, and nothing under ``src/`` loads the reference.

The runtime is every module of ``lucyshop`` outside ``lucyshop.lab`` and ``lucyshop.proof`` (store,
queue, proposal, approval, the supplier's server and client, models, status, validate, the ``python
-m lucyshop`` command). The lab may use the runtime; the runtime may not use the lab, or a student
could not run the shop without the grading machinery. And code under ``src/`` chooses an
implementation only when told to: a hard-coded load of ``solutions``, or a command line or function
that falls back to it, would run the reference where a student's file was meant.

Inside the lab, the rooms import downward only (docs/instructors.md, Layout): import-linter's
``lab-rooms`` layers contract, which must place every room. The proof measures the lab and the
runtime and neither imports it (``course-below-proof``); its rooms stay independent
(``proof-rooms``).

The first rule is import-linter's contract in pyproject.toml (``lint-imports``, which counts an
import inside a function too); the second is read from the source with ``ast``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "lucyshop"
LAB = PACKAGE / "lab"
PROOF = PACKAGE / "proof"
RUNTIME = sorted(
    p for p in PACKAGE.rglob("*.py") if LAB not in p.parents and PROOF not in p.parents
)
EVERYTHING = sorted(SRC.rglob("*.py"))
LOADERS = {"load_impl", "impl_path", "block_for"}


def name(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def module_of(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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
        "lucyshop/status/__init__.py",
        "lucyshop/status/__main__.py",
        "lucyshop/status/render.py",
        "lucyshop/status/signals.py",
        "lucyshop/store.py",
        "lucyshop/supplier/server.py",
        "lucyshop/supplier/client.py",
        "lucyshop/validate.py",
    } <= names
    assert not any(n.startswith("lucyshop/lab/") for n in names)


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter's contracts (pyproject.toml) on the package under ``root / "src"``."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=root,
        env=os.environ | {"PYTHONPATH": str(root / "src")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def contract(name: str = "runtime-below-lab") -> dict:
    config = tomllib.loads((SRC.parent / "pyproject.toml").read_text())["tool"]["importlinter"]
    return next(c for c in config["contracts"] if c["id"] == name)


def rooms_in_layers() -> list[str]:
    """Every room and top-level lab module the rooms contract places, top layer first."""
    return [room.strip() for layer in contract("lab-rooms")["layers"] for room in layer.split("|")]


def test_the_rooms_contract_places_every_room_and_lab_module():
    """A new room, or a module added loose at the top of the lab, is under the contract only
    once it is given a layer."""
    present = {p.stem for p in LAB.glob("*.py") if p.stem != "__init__"}
    present |= {p.name for p in LAB.iterdir() if (p / "__init__.py").is_file()}
    assert sorted(rooms_in_layers()) == sorted(present)


def test_the_layer_contract_names_every_runtime_module():
    """A new runtime module is under the contract only once it is listed there."""
    tops = {module_of(p).split(".")[1] for p in RUNTIME if module_of(p) != "lucyshop"}
    assert set(contract()["source_modules"]) == {f"lucyshop.{t}" for t in tops}


def test_the_runtime_never_imports_the_lab_and_the_rooms_import_downward():
    result = lint_imports(SRC.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the runtime never imports the lab KEPT" in result.stdout
    assert "the lab's rooms import downward only KEPT" in result.stdout
    assert "the course never imports the proof KEPT" in result.stdout


@pytest.mark.parametrize("path", EVERYTHING, ids=name)
def test_nothing_under_src_loads_the_reference(path):
    assert reference_loads(path) == [], f"{name(path)} loads the reference"


def test_the_checks_see_what_they_look_for(tmp_path):
    """Each rule finds a planted offence: the rules are not vacuous."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        "def f():\n"
        "    return loader.load_impl('solutions'), load_impl('solutions/ch13_leases.py')\n"
        "def g(spec='solutions', *, impl='solutions'):\n"
        "    parser.add_argument('--impl', default='solutions')\n"
    )
    assert len(reference_loads(planted)) == 5
