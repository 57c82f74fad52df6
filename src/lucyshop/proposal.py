"""What an order proposal is, in one place: the shop and the supplier validate it the same way.

A proposal is a small JSON object ``{"sku": str, "quantity": int, "unit_cents": int}``. Its
canonical text (sorted keys, no spaces) is what digests and operation ids are computed from,
so two spellings of the same order can never become two operations.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

# Matched with fullmatch: "$" alone would let a trailing newline through.
SKU = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
MAX_QUANTITY = 1000
MAX_UNIT_CENTS = 100_000
OPERATION = re.compile(r"[A-Za-z0-9_-]{1,128}")


def validate_proposal(proposal: Any) -> dict[str, Any]:
    """Return the proposal with exactly its three fields, or raise ValueError saying what is
    wrong."""
    if not isinstance(proposal, dict):
        raise ValueError(f"a proposal must be a JSON object, not {type(proposal).__name__}")
    fields = {"sku", "quantity", "unit_cents"}
    if set(proposal) != fields:
        raise ValueError(
            f"a proposal has exactly the fields {sorted(fields)}, got {sorted(proposal)}"
        )
    sku, quantity, unit = proposal["sku"], proposal["quantity"], proposal["unit_cents"]
    if not isinstance(sku, str) or not SKU.fullmatch(sku):
        raise ValueError(f"sku must be lower-case letters, digits and '-', at most 64: {sku!r}")
    for name, value, top in (
        ("quantity", quantity, MAX_QUANTITY),
        ("unit_cents", unit, MAX_UNIT_CENTS),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise ValueError(f"{name} must be a whole number from 1 to {top}: {value!r}")
    return {"sku": sku, "quantity": quantity, "unit_cents": unit}


def canonical(proposal: dict[str, Any]) -> str:
    """The one spelling of a proposal that digests and operation ids are taken from."""
    return json.dumps(validate_proposal(proposal), sort_keys=True, separators=(",", ":"))


def amount_cents(proposal: dict[str, Any]) -> int:
    checked = validate_proposal(proposal)
    return checked["quantity"] * checked["unit_cents"]


def digest(proposal: dict[str, Any]) -> str:
    """What an operator approves: the sha256 of the canonical proposal."""
    return hashlib.sha256(canonical(proposal).encode()).hexdigest()


def operation_id(work_id: int, supplier: str, proposal: dict[str, Any]) -> str:
    """Deterministic: the same work, target and proposal always name the same operation."""
    text = f"{work_id}\n{supplier}\n{canonical(proposal)}"
    return "op-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def validate_operation(operation: Any) -> str:
    if not isinstance(operation, str) or not OPERATION.fullmatch(operation):
        raise ValueError(f"an operation id is 1-128 letters, digits, '_' or '-': {operation!r}")
    return operation
