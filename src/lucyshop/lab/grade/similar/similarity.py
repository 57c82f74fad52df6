"""Fingerprints of a Python file that survive renaming and reformatting (MOSS-style winnowing).

A file that parses becomes the pre-order walk of its syntax tree: one token per node type
(``Assign``, ``Call``, ``Name``, ``Add``, ...), with every identifier, attribute, argument name
and literal value dropped (a literal keeps only its kind: ``str``, ``num``, ``bool``, ``None``)
and docstrings left out. Layout, comments, parentheses, quotes and line breaks are not in the
tree, so ``ast.unparse`` of a copy, or a formatter at another line length, gives the very same
stream; a rename changes nothing either. A file that does not parse falls back to its raw text
with whitespace normalised (identifiers, numbers and one-line strings each one symbol), and a
pair with such a file is compared in that form on both sides. Hashes of every ``K``
consecutive tokens are winnowed (the smallest of each window of ``W``) into fingerprints, each
kept with the line range it came from, so a match can be shown side by side. Fingerprints the
starter files (``learner/``) also have are dropped: the signatures, imports and dataclasses
every student starts from prove nothing.

Code hidden as data is compared as the code it is: a string or bytes literal that decodes
(base64, base32, base16, base85) and decompresses (zlib or gzip, bz2, lzma), in any nesting up
to ``DEPTH`` steps, into Python source is walked in the literal's place, at the literal's line
(``hidden_code``), so a reference shipped as a blob and ``exec``'d scores as the reference does.
And a hand-in that uses ``HIDING`` (``exec``, ``eval``, ``compile``, ``marshal``, ``zlib``,
``base64``, ``__import__``), which the chapter needs none of, is flagged for a person to look at
whatever it scores (``hiding``): a blob this module cannot open (a marshalled code object, a
key of its own) still shows.

Written here rather than taken from copydetect (checked in the package index): copydetect
tokenises with pygments, so it sees layout-dependent tokens and cannot use the syntax tree,
which is what makes ``ast.unparse`` and a reformatted copy score the same as the original; it
would also add numpy, pygments and jinja2 to a grader that needs none of them. The side-by-side
page is ``pairs_html``; the comparisons across a class are ``pairs``.

This module reads the reference: it is the instructor's tool and runs in the grader, never in
a process that runs student code.
"""

from __future__ import annotations

import ast
import base64
import binascii
import bz2
import hashlib
import keyword
import lzma
import re
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from lucyshop.lab.loader import CHAPTER, EXERCISES, IMPLEMENTATIONS

K = 16  # tokens per k-gram: about one line of the chapter's code
W = 8  # winnowing window: any shared run of K + W - 1 tokens is found
AST, TEXT = "ast", "text"
_WORD = re.compile(r"""[A-Za-z_]\w*|\d[\w.]*|"[^"\n]*"|'[^'\n]*'|\S""")
HIDING = ("exec", "eval", "compile", "marshal", "zlib", "base64", "__import__")
MIN_BLOB = 64  # characters of a literal worth trying to open
DEPTH = 4  # decodings and decompressions, one inside the other
MAX_OPENED = 4 << 20  # bytes one literal may open into (a decompression bomb stops there)
TRIES = 64  # blobs looked at for one literal, opened ones included


@dataclass(frozen=True)
class Stream:
    """Normalised tokens and the source line each came from."""

    mode: str  # AST or TEXT
    tokens: tuple[str, ...]
    lines: tuple[int, ...]


Prints = dict[int, tuple[int, int]]  # fingerprint -> the first line range it covers


_PARSING = threading.Lock()


def parse(source: str) -> ast.Module:
    """``ast.parse``, one thread at a time: the grader compares hand-ins from several threads,
    and CPython 3.11 before 3.11.8 can fail two parses at once ("AST constructor recursion
    depth mismatch")."""
    with _PARSING:
        return ast.parse(source)


def syntax_stream(source: str) -> Stream | None:
    """The syntax tree as tokens, or None when ``source`` does not parse; a literal that
    holds code (``hidden_code``) is walked as that code, at the literal's line."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    tokens: list[str] = []
    lines: list[int] = []
    stack: list[tuple[ast.AST, int, bool]] = [(child, 1, False) for child in reversed(tree.body)]
    while stack:  # a stack, not recursion: deep nesting cannot overflow the grader
        node, line, opened = stack.pop()
        if _is_bare_string(node):
            continue  # docstrings and string statements
        line = line if opened else getattr(node, "lineno", line)
        inside = hidden_code(node.value) if isinstance(node, ast.Constant) else None
        if inside is not None:
            stack.extend((child, line, True) for child in reversed(inside.body))
            continue
        tokens.append(_label(node))
        lines.append(line)
        children = [c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.expr_context)]
        stack.extend((child, line, opened) for child in reversed(children))
    return Stream(AST, tuple(tokens), tuple(lines))


def hidden_code(value: object) -> ast.Module | None:
    """The Python a string or bytes literal holds, as itself or opened by up to ``DEPTH``
    decodings and decompressions (``_OPENERS``), looking at ``TRIES`` blobs at most; None when
    it holds none (a plain message, a blob that opens into no function or class)."""
    if not isinstance(value, str | bytes) or len(value) < MIN_BLOB:
        return None
    tried: list[tuple[bytes | str, int]] = [(value, 0)]
    for _ in range(TRIES):
        if not tried:
            break
        blob, depth = tried.pop()
        tree = _code_in(blob)
        if tree is not None:
            return tree
        if depth < DEPTH:
            data = blob.encode("latin-1", "ignore") if isinstance(blob, str) else blob
            tried += [(opened, depth + 1) for opened in _opened(data)]
    return None


def _code_in(blob: bytes | str) -> ast.Module | None:
    """``blob`` parsed as Python when it is text that defines a function or a class."""
    try:
        text = blob.decode("utf-8") if isinstance(blob, bytes) else blob
        if "def " not in text and "class " not in text and "lambda" not in text:
            return None
        tree = parse(text)
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    defines = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    return tree if any(isinstance(node, defines) for node in ast.walk(tree)) else None


def _opened(data: bytes) -> list[bytes]:
    """Every way ``data`` decodes or decompresses, each at most ``MAX_OPENED`` bytes."""
    found = []
    for opener in _OPENERS:
        try:
            opened = opener(data)
        except (ValueError, binascii.Error, zlib.error, OSError, lzma.LZMAError, EOFError):
            continue
        if opened and opened != data:
            found.append(opened[:MAX_OPENED])
    return found


def _squeezed(data: bytes) -> bytes:
    return re.sub(rb"\s+", b"", data)


def _inflated(data: bytes) -> bytes:
    return zlib.decompressobj(wbits=47).decompress(data, MAX_OPENED)  # zlib or gzip


def _bunzipped(data: bytes) -> bytes:
    return bz2.BZ2Decompressor().decompress(data, MAX_OPENED)


def _unxzed(data: bytes) -> bytes:
    return lzma.LZMADecompressor().decompress(data, MAX_OPENED)


_OPENERS: tuple[Callable[[bytes], bytes], ...] = (
    lambda data: base64.b64decode(_squeezed(data), validate=True),
    lambda data: base64.b64decode(_squeezed(data), altchars=b"-_", validate=True),
    lambda data: base64.b32decode(_squeezed(data)),
    lambda data: base64.b16decode(_squeezed(data), casefold=True),
    lambda data: base64.b85decode(_squeezed(data)),
    lambda data: base64.a85decode(_squeezed(data)),
    _inflated,
    _bunzipped,
    _unxzed,
)


def hiding(source: str) -> list[str]:
    """The names of ``HIDING`` that ``source`` uses (called, named or imported), each with
    the first line it is on, as ``exec (line 12)``; empty when it uses none or does not
    parse (a file that does not parse runs nothing)."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    first: dict[str, int] = {}
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute) and node.attr in ("exec", "eval", "__import__"):
            names = [node.attr]  # ``builtins.exec``; ``re.compile`` is no hiding place
        elif isinstance(node, ast.Import):
            names = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [(node.module or "").split(".")[0]]
            names += [alias.name for alias in node.names]
        for name in names:
            if name in HIDING:
                first[name] = min(first.get(name, node.lineno), node.lineno)
    return [f"{name} (line {line})" for name, line in sorted(first.items(), key=lambda i: i[1])]


def _is_bare_string(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _label(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        value = node.value
        kind = "str" if isinstance(value, str | bytes) else type(value).__name__
        return f"Constant:{'num' if kind in ('int', 'float', 'complex') else kind}"
    return type(node).__name__


def text_stream(source: str) -> Stream:
    """The raw text as tokens, whitespace normalised: the fallback for what does not parse."""
    tokens: list[str] = []
    lines: list[int] = []
    for number, line in enumerate(source.splitlines(), start=1):
        for word in _WORD.findall(line):
            tokens.append(_symbol(word))
            lines.append(number)
    return Stream(TEXT, tuple(tokens), tuple(lines))


def _symbol(word: str) -> str:
    if word[0].isalpha() or word[0] == "_":
        return word if keyword.iskeyword(word) else "N"
    if word[0].isdigit():
        return "0"
    return "S" if word[0] in "\"'" and len(word) > 1 else word


def fingerprints(stream: Stream) -> Prints:
    """The winnowed k-gram hashes of ``stream``, each with the lines of its first k-gram."""
    count = len(stream.tokens) - K + 1
    if count <= 0:
        return {}
    grams = [_hash(stream.tokens[i : i + K]) for i in range(count)]
    chosen: Prints = {}
    for start in range(max(count - W + 1, 1)):
        window = grams[start : start + W]
        low = min(window)
        index = start + max(i for i, g in enumerate(window) if g == low)  # rightmost minimum
        if low not in chosen:
            span = stream.lines[index : index + K]
            chosen[low] = (min(span), max(span))
    return chosen


def _hash(tokens: tuple[str, ...]) -> int:
    digest = hashlib.blake2b("\x1f".join(tokens).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@dataclass(frozen=True)
class Fingerprinted:
    """One file's fingerprints in both forms (``syntax`` is None when it does not parse)."""

    syntax: Prints | None
    text: Prints

    def form(self, mode: str) -> Prints:
        return self.syntax if mode == AST and self.syntax is not None else self.text


@cache
def fingerprinted(source: str) -> Fingerprinted:
    """Both forms of ``source`` (cached: the same file is compared with many)."""
    stream = syntax_stream(source)
    return Fingerprinted(
        None if stream is None else fingerprints(stream), fingerprints(text_stream(source))
    )


Span = tuple[int, int]  # first and last line


@cache
def regions(source: str) -> tuple[Span, ...]:
    """The line spans of every function, method and class, and of each other top-level
    statement: a match is shown one region at a time (empty when ``source`` does not parse)."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    spans = [_span(node) for node in tree.body]
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            spans.append(_span(node))
    return tuple(sorted(set(spans)))


def _span(node: ast.stmt) -> Span:
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return first, node.end_lineno or node.lineno


def region_of(spans: tuple[Span, ...], line: int) -> Span | None:
    """The narrowest span holding ``line``."""
    holding = [s for s in spans if s[0] <= line <= s[1]]
    return min(holding, key=lambda s: s[1] - s[0]) if holding else None


def mode_for(a: Fingerprinted, b: Fingerprinted) -> str:
    """The form a pair is compared in: the syntax tree unless either side does not parse."""
    return AST if a.syntax is not None and b.syntax is not None else TEXT


@cache
def starter(paths: tuple[Path, ...]) -> Fingerprinted:
    """The fingerprints of the starter files together: discounted from every comparison."""
    prints = [fingerprinted(path.read_text(encoding="utf-8")) for path in paths]
    return Fingerprinted(
        {h: r for p in prints for h, r in (p.syntax or {}).items()},
        {h: r for p in prints for h, r in p.text.items()},
    )


LEARNER = IMPLEMENTATIONS["learner"].parent
STARTER = (LEARNER / CHAPTER, LEARNER / EXERCISES)


@cache
def own(source: str, mode: str, starting: tuple[Path, ...] = STARTER) -> Prints:
    """The fingerprints of ``source`` in ``mode`` that the starter files do not have."""
    base = starter(starting).form(mode)
    return {h: r for h, r in fingerprinted(source).form(mode).items() if h not in base}


def similarity(
    source: str,
    reference: Path = IMPLEMENTATIONS["solutions"],
    starting: tuple[Path, ...] = STARTER,
) -> float:
    """Share (0-1) of the reference's own fingerprints found in ``source``."""
    text = reference.read_text(encoding="utf-8")
    mode = mode_for(fingerprinted(source), fingerprinted(text))
    ref = own(text, mode, starting)
    if not ref:
        return 0.0
    return round(len(own(source, mode, starting).keys() & ref.keys()) / len(ref), 3)
