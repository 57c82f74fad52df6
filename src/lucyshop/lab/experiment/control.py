"""The negative control of the fence: a copy of a chapter file whose holder check has lost the
generation.

A fence experiment that only ever sees refusals cannot tell a working generation comparison
from a missing one. So the same trials also run against ``unfenced(source)``: the chapter file
with ``assert_current``'s generation comparison deleted and its worker-id comparison reduced to
the owner label (``owner#generation`` compared whole would still fence by generation). Its stale
writes must be accepted; the receipt counts them.

The edit is made on the syntax tree, and each of the two comparisons must be found exactly
once: a chapter file written another way is refused, never silently left fenced.
"""

from __future__ import annotations

import ast
from pathlib import Path

FUNCTION = "assert_current"


def _named(node: ast.expr) -> str | None:
    """The name a value is read under: ``x`` for ``x`` and for ``row["x"]``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    return None


def _compares(test: ast.expr, left: str, right: str) -> bool:
    """``test`` is ``left != held.right``, ``left`` a name or a row's field."""
    return (
        isinstance(test, ast.Compare)
        and _named(test.left) == left
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.NotEq)
        and isinstance(test.comparators[0], ast.Attribute)
        and test.comparators[0].attr == right
    )


class _Unfence(ast.NodeTransformer):
    def __init__(self) -> None:
        self.dropped = self.loosened = 0

    def visit_If(self, node: ast.If) -> ast.AST | None:
        self.generic_visit(node)
        if _compares(node.test, "generation", "generation"):
            self.dropped += 1
            return None
        if _compares(node.test, "worker_id", "worker_id"):
            self.loosened += 1
            held = node.test.comparators[0].value
            mine = ast.unparse(node.test.left)
            node.test = ast.parse(
                f"{mine}.split('#')[0] != {ast.unparse(held)}.owner", mode="eval"
            ).body
        return node


def unfenced(source: Path, out: Path) -> Path:
    """Write to ``out`` a copy of the chapter file ``source`` without the generation fence.

    A file whose check compares the owner label and the generation apart (exercise 7's
    ``ch13_postgres.py``) has no worker-id comparison to loosen; one that compares
    ``owner#generation`` must have exactly one."""
    tree = ast.parse(source.read_text(encoding="utf-8"))
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == FUNCTION]
    if len(found) != 1:
        raise ValueError(f"{source} has {len(found)} functions named {FUNCTION}, not one")
    edit = _Unfence()
    edit.visit(found[0])
    if edit.dropped != 1 or edit.loosened > 1:
        raise ValueError(
            f"{source}'s {FUNCTION} has {edit.dropped} generation and {edit.loosened} worker-id"
            " comparisons; the control removes exactly one of each"
        )
    said = f"Negative control: {source.name} without the generation fence (experiment.control)."
    if ast.get_docstring(tree) is not None:
        tree.body.pop(0)
    tree.body.insert(0, ast.Expr(ast.Constant(said)))
    out.write_text(ast.unparse(ast.fix_missing_locations(tree)) + "\n", encoding="utf-8")
    return out


# Which comparison of the holder check refused a write, from the words of its PermissionError
# (the reference's messages, on SQLite and on PostgreSQL); first match wins.
COMPARISONS = (
    ("exists", ("has no lease", "does not exist")),
    ("state", (", not running",)),
    ("generation", ("superseded by",)),
    ("worker_id", ("is held by",)),
    ("expiry", ("expired",)),
)


def comparison(refusal: str) -> str:
    """The comparison a refusal names: exists, state, generation, worker_id or expiry; or
    ``unnamed`` for a message in other words (an implementation other than the reference)."""
    for name, words in COMPARISONS:
        if any(word in refusal for word in words):
            return name
    return "unnamed"
