"""Input checks, each stated once: what the runtime and the chapter's functions accept.

Every check raises ValueError naming the argument, the rule and the value, and never any other
exception type: Python's own answers to odd input (OverflowError for ``10**400``, TypeError for
an unhashable value, UnicodeEncodeError for a lone surrogate) would escape as crashes.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

EARLIEST = 0.0
LATEST = 4_102_444_800.0  # 2100-01-01 00:00:00 UTC: an injected clock beyond it is a mistake
MAX_LABEL = 100  # owner labels, actors, supplier identities
MAX_ID = 200  # source and session ids
MAX_TEXT = 4000  # an assignment's text, a cancellation's reason
MAX_JSON = 64 * 1024  # characters of one transcript message or outcome result, as JSON
MAX_ROW_ID = 2**63 - 1  # SQLite's largest integer


def seconds(value: Any, name: str, *, positive: bool = False, most: float = math.inf) -> float:
    """``value`` as float seconds: a real number (not a bool), finite, from 0 (or above 0 when
    ``positive``) and at most ``most``."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    try:
        ok = number and math.isfinite(value) and (value > 0 if positive else value >= 0)
        ok = ok and value <= most
    except OverflowError:  # an int too large for a float
        ok = False
    if not ok:
        low = "above 0" if positive else "from 0"
        high = "" if math.isinf(most) else f" and at most {most:g}"
        raise ValueError(f"{name} must be a finite number of seconds {low}{high}: {value!r:.80}")
    return float(value)


def clock(now: Any) -> float:
    """The time to act at: ``time.time()`` when ``now`` is None, else the injected ``now``, which
    must lie from 0 to 4102444800 (the year 2100) seconds since 1970."""
    if now is None:
        return time.time()
    try:
        return seconds(now, "now", most=LATEST)
    except ValueError:
        raise ValueError(
            f"now must be a time from {EARLIEST:g} to {LATEST:.0f} seconds since 1970"
            f" (the year 2100): {now!r:.80}"
        ) from None


def encodable(value: str) -> bool:
    """False for text SQLite cannot store as UTF-8 (a lone surrogate such as ``'\\ud800'``)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(value: str) -> bool:
    """False when ``value`` holds a control character (NUL, ESC, newline, DEL, C1 controls)."""
    return not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value)


def label(value: Any, name: str, *, most: int = MAX_LABEL, forbidden: str = "") -> str:
    """A name shown to people and matched exactly: non-blank text of at most ``most``
    characters, without control characters or any of ``forbidden``."""
    ok = (
        isinstance(value, str)
        and value.strip() != ""
        and len(value) <= most
        and printable(value)
        and encodable(value)
        and not any(c in value for c in forbidden)
    )
    if not ok:
        without = "".join(f"'{c}' or " for c in forbidden)
        raise ValueError(
            f"{name} must be a non-empty label of at most {most} characters without"
            f" {without}control characters: {value!r:.120}"
        )
    return value


def owner_of(worker_id: str | None) -> str:
    """The owner label of a ``worker_id`` (``owner#generation``), '' for none: an owner label
    never holds a '#' (``label(..., forbidden="#")``), so the first one ends it."""
    return (worker_id or "").partition("#")[0]


def string(value: Any, name: str) -> str:
    """Any ``str`` (for a name matched against a list, where a mismatch is its own refusal)."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {type(value).__name__}: {value!r:.80}")
    return value


def text(value: Any, name: str, *, most: int = MAX_TEXT) -> str:
    """Free text (line breaks allowed): non-blank, at most ``most`` characters, valid UTF-8."""
    if not isinstance(value, str) or not value.strip() or not encodable(value):
        raise ValueError(f"{name} must be non-empty text: {value!r:.80}")
    if len(value) > most:
        raise ValueError(f"{name} is {len(value)} characters; the limit is {most}")
    return value


def json_text(value: Any, name: str, *, most: int = MAX_JSON) -> str:
    """``value`` as canonical JSON text (sorted keys, no NaN or infinity), at most ``most``
    characters."""
    try:
        encoded = json.dumps(value, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError) as error:
        raise ValueError(f"the {name} must be JSON (no NaN or infinity): {error}") from None
    if len(encoded) > most:
        raise ValueError(f"the {name} is {len(encoded)} characters of JSON; the limit is {most}")
    return encoded


def row_id(value: Any, name: str) -> int:
    """A row id: a Python int (not a bool, not the string ``"1"``) from 1 to 2**63 - 1."""
    if type(value) is not int or not 1 <= value <= MAX_ROW_ID:
        raise ValueError(f"{name} must be a whole number from 1 to 2**63 - 1: {value!r:.80}")
    return value
