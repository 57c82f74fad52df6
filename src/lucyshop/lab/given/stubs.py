"""The error every unfinished learner function raises, and how to tell a stub from its syntax."""

import ast
import functools
import os
import sys
from collections.abc import Iterator


class NotStarted(NotImplementedError):
    """A learner stub that has not been written yet.

    It names the function, the notebook section that teaches it, and the file the stub is in,
    so the first thing a student sees is where to read, not a traceback into code they have
    not touched.
    """

    def __init__(self, function: str, section: str, where: str | None = None) -> None:
        self.function = function
        self.section = section
        if where is None:  # the file of the stub that raised: the student's file
            stub = sys._getframe(1).f_code.co_filename
            where = stub if os.path.relpath(stub).startswith("..") else os.path.relpath(stub)
        self.where = where
        super().__init__(
            f"{function}() is not started: read notebook {section}, "
            f"then replace the `raise NotStarted(...)` line in {where}"
        )


def is_stub_node(node: ast.AST) -> bool:
    """A function whose body is still only its docstring and ``raise NotStarted(...)``.

    Read from the syntax tree, so nothing the file does when it runs can change the answer.
    """
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    body = _after_docstring(node)
    return (
        len(body) == 1
        and isinstance(body[0], ast.Raise)
        and isinstance(body[0].exc, ast.Call)
        and isinstance(body[0].exc.func, ast.Name)
        and body[0].exc.func.id == "NotStarted"
    )


def stub_section(node: ast.AST) -> str | None:
    """The section a stub's ``raise NotStarted(name, section)`` names, when it is a literal."""
    if not is_stub_node(node):
        return None
    args = _after_docstring(node)[0].exc.args
    if len(args) >= 2 and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
        return args[1].value
    return None


def functions_in(tree: ast.Module) -> Iterator[tuple[str, ast.stmt]]:
    """Every top-level statement and class member, named ``Class.member`` inside a class."""
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        prefix = f"{node.name}." if isinstance(node, ast.ClassDef) else ""
        for member in members:
            yield prefix + getattr(member, "name", ""), member


def _after_docstring(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    return node.body[1:] if ast.get_docstring(node) is not None else node.body


def stub_nodes(path: os.PathLike | str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions of ``path`` (``Class.method`` for methods) whose body is still the stub,
    read from its syntax tree; empty for a file that cannot be read or parsed."""
    try:
        with open(path, encoding="utf-8") as handle:
            return dict(_stubs_in(handle.read()))
    except (OSError, ValueError):
        return {}


@functools.lru_cache(maxsize=8)
def _stubs_in(source: str) -> tuple[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef], ...]:
    """The stub functions of one file's text: parsed once per text (a suite asks before each
    test), so an edited file is parsed again."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    return tuple((name, node) for name, node in functions_in(tree) if is_stub_node(node))


def placeholders(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[list, dict]:
    """``None`` for every parameter without a default: enough arguments to call a stub, which
    ignores them and raises its own ``NotStarted``."""
    arguments = node.args
    positional = arguments.posonlyargs + arguments.args
    required = len(positional) - len(arguments.defaults)
    args = [None] * required
    if node.name != "<lambda>" and positional and positional[0].arg in ("self", "cls"):
        args = args[1:]
    kwargs = {
        a.arg: None
        for a, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
        if default is None
    }
    return args, kwargs
