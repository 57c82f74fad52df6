"""How much of the reference a submission contains, insensitive to renaming (MOSS-style).

Each file becomes a stream of tokens in which every identifier is ``N``, every string ``S``
and every number ``0`` (keywords, operators and layout stay), with comments and docstrings
dropped. Hashes of every ``K`` consecutive tokens are winnowed (the smallest hash of each
window of ``W``) into a set of fingerprints. Fingerprints that the starter file
(``learner/ch13_leases.py``) also has are removed from both sides: the signatures, imports
and dataclasses every student starts from prove nothing. The score is the share of the
reference's remaining fingerprints found in the submission: 1.0 for the reference however
renamed, near 0 for the stubs.

This module reads the reference: it is the instructor's tool and runs in the grader, never in
a process that runs student code.
"""

from __future__ import annotations

import hashlib
import io
import keyword
import tokenize
from functools import cache
from pathlib import Path

from lucyshop.lab.loader import IMPLEMENTATIONS

K = 16  # tokens per k-gram: about one line of the chapter's code
W = 8  # winnowing window: any shared run of K + W - 1 tokens is found
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_LINE_START = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, None}
# Python 3.12 splits f-strings into parts: the start stands for the string, the rest is dropped.
_FSTRING_START = getattr(tokenize, "FSTRING_START", -1)
_FSTRING_REST = {getattr(tokenize, "FSTRING_MIDDLE", -2), getattr(tokenize, "FSTRING_END", -3)}


def tokens(source: str) -> list[str]:
    """The normalised token stream of ``source``; ValueError when it does not tokenize."""
    out: list[str] = []
    previous = None
    try:
        stream = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError) as error:
        raise ValueError(f"not Python tokens: {error}") from None
    dropped = False
    for index, token in enumerate(stream):
        kind = token.type
        if kind in _SKIP:
            continue
        if dropped and kind == tokenize.NEWLINE:
            dropped = False
            continue
        if kind == tokenize.STRING and previous in _LINE_START and _ends_line(stream, index):
            dropped = True  # a docstring or a bare string statement, and its line's end
            continue
        previous = kind
        if kind == tokenize.NAME:
            out.append(token.string if keyword.iskeyword(token.string) else "N")
        elif kind in (tokenize.STRING, _FSTRING_START):
            out.append("S")
        elif kind == tokenize.NUMBER:
            out.append("0")
        elif kind in _FSTRING_REST:
            continue
        else:
            out.append(token.string or tokenize.tok_name[kind])
    return out


def _ends_line(stream: list[tokenize.TokenInfo], index: int) -> bool:
    following = stream[index + 1] if index + 1 < len(stream) else None
    return following is None or following.type in (tokenize.NEWLINE, tokenize.ENDMARKER)


def fingerprints(source: str) -> set[int]:
    """The winnowed k-gram hashes of ``source``."""
    stream = tokens(source)
    grams = [
        int.from_bytes(
            hashlib.blake2b(" ".join(stream[i : i + K]).encode(), digest_size=8).digest()
        )
        for i in range(len(stream) - K + 1)
    ]
    if len(grams) <= W:
        return set(grams)
    return {min(grams[i : i + W]) for i in range(len(grams) - W + 1)}


@cache
def _baseline(reference: Path, starter: Path) -> tuple[frozenset[int], frozenset[int]]:
    base = fingerprints(starter.read_text(encoding="utf-8"))
    ref = fingerprints(reference.read_text(encoding="utf-8")) - base
    return frozenset(ref), frozenset(base)


def similarity(
    source: str,
    reference: Path = IMPLEMENTATIONS["solutions"],
    starter: Path = IMPLEMENTATIONS["learner"],
) -> float | None:
    """Share (0-1) of the reference's own fingerprints found in ``source``; None if unreadable."""
    ref, base = _baseline(reference, starter)
    try:
        mine = fingerprints(source) - base
    except ValueError:
        return None
    if not ref:
        return 0.0
    return round(len(mine & ref) / len(ref), 3)
