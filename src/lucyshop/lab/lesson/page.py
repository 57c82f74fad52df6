"""What a notebook shows beside the lesson: the stub the learner is about to write, as their
file has it, and which check refused a stale holder in a checkpoint case."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def stub(module: Any, name: str) -> None:
    """The signature and docstring of ``name`` (``Class.member`` for a method) as the learner's
    file has them: what the section asks you to write, without opening the file."""
    from lucyshop.lab.given.stubs import functions_in
    from lucyshop.lab.lesson.inline import wrap
    from lucyshop.lab.lesson.show import say, without_paths

    path = Path(module.__file__)
    source = path.read_text()
    found = dict(functions_in(ast.parse(source))).get(name)
    if found is None:
        say(f"{name} is not in {without_paths(str(path))}")
        return
    lines = source.splitlines()
    first = min([found.lineno, *(d.lineno for d in found.decorator_list)])
    body = found.body[0]
    has_doc = isinstance(body, ast.Expr) and isinstance(getattr(body, "value", None), ast.Constant)
    last = body.end_lineno if has_doc else body.lineno - 1
    shown = [line for line in lines[first - 1 : last] if line.strip()]
    print(f"# {without_paths(str(path))}, line {first}")
    print(wrap("\n".join(shown)))  # a line past the notebook's width breaks between words


# ------------------------------------------------ which fence refused a stale holder

FENCES = (
    ("is finished, not running", "the state check: the work is no longer running"),
    ("superseded by generation", "the generation check: a newer claim holds the lease"),
    ("not held by", "chapter 11's holder check in execute: the work row names another worker id"),
    ("expired", "the expiry check: the lease ran out"),
)


def fence_of(reason: str) -> str:
    """Which check a ``PermissionError`` reason comes from, by its wording in the reference."""
    return next((fence for words, fence in FENCES if words in reason), "another check")


def stale_reasons(evidence: Mapping[str, Any] | None, name: str, case: str) -> None:
    """The refusals a stale holder met at each boundary in checkpoint case ``name``, with the
    reason and the fence that gave it: your run once the case passed, else the reference's."""
    from lucyshop.lab.lesson.show import checkpoint_run, say

    run = checkpoint_run(evidence, name)
    found = (run.get("cases", {}).get(name) or {}).get("stale_child_reported")
    if found is None:  # the reference's record keeps the timeline, not the case's fields
        found = next(
            e
            for e in run["timeline"]
            if e.get("case") == case and e["event"] == "stale holder reported"
        )
    for boundary in ("transcript", "completion", "supplier"):
        reason = str(found.get(boundary, "?"))
        say(f"{boundary:10} {reason}")
        say(f"{'':10}   refused by {fence_of(reason)}")
