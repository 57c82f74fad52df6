"""What the model is asked: eight kinds of shop task for timed turns, and one crashed transcript.

The timed turns are ordinary shop work, because the lease has to cover the turns a worker
really runs. The crashed transcript is the moment recovery is about: the last thing on record
is an order sent to the supplier with its operation key, and no reply.
"""

from __future__ import annotations

from lucyshop.lab.given.orders import VANILLA
from lucyshop.proposal import operation_id

SYSTEM = (
    "You are the assistant of Lucy's ice cream shop. You answer customers, write to the "
    "supplier and keep the shop's notes. Be brief and friendly."
)

TASKS: dict[str, str] = {
    "stock question": (
        "A customer asks whether we have vanilla tubs in stock for a party on Saturday. "
        "Reply to them."
    ),
    "supplier note": (
        "Write a short note to our supplier asking for six tubs of vanilla and four of "
        "chocolate, delivered on Friday morning."
    ),
    "complaint": (
        "A customer says their strawberry cone had melted before they got it home. "
        "Write a reply that apologises and offers something fair."
    ),
    "allergens": (
        "A parent asks which flavours are safe for a child with a nut allergy. We make vanilla, "
        "chocolate, pistachio and lemon sorbet in one kitchen. Answer carefully."
    ),
    "menu text": "Write two sentences for the menu board about our new honey and lavender flavour.",
    "day summary": (
        "Yesterday we sold 42 cones, 17 tubs and 9 milkshakes, and the freezer alarm went off "
        "once. Summarise the day for Lucy in three lines."
    ),
    "opening hours": (
        "A customer asks whether we are open on the bank holiday Monday. We open from 12 to 6 "
        "that day. Reply to them."
    ),
    "catering quote": (
        "A school asks for a quote for 120 small cups of ice cream for sports day. Small cups "
        "are 1.50 each, and orders over 100 cups get 10% off. Write the quote."
    ),
}
KINDS = tuple(TASKS)


def kind_of(index: int) -> str:
    """The task kind of the ``index``-th turn of a phase: the eight kinds in turn."""
    return KINDS[index % len(KINDS)]


def turn_messages(kind: str) -> list[dict]:
    """One timed turn: the shop's system prompt and one task."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASKS[kind]}]


# --- Recovery: a worker crashed right after sending an order --------------------------------

SUPPLIER = "lucy-supplier"
# The shop's own deterministic key for this order (work 1, this supplier, this proposal).
OPERATION = operation_id(1, SUPPLIER, VANILLA)

RECOVERY_TOOLS: list[dict] = [
    {
        "type": "function",
        "function": {
            "name": "place_order",
            "description": "Send an order to the supplier under the shop's operation key.",
            "parameters": {
                "type": "object",
                "properties": {
                    "operation": {"type": "string", "description": "the order's operation key"},
                    "sku": {"type": "string"},
                    "quantity": {"type": "integer"},
                },
                "required": ["operation", "sku", "quantity"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": (
                "Ask the supplier whether an order with this operation key was received, "
                "and get its receipt."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "operation": {"type": "string", "description": "the order's operation key"}
                },
                "required": ["operation"],
            },
        },
    },
]


def crashed_transcript(operation: str = OPERATION) -> list[dict]:
    """The transcript a replacement finds: the order was sent, its reply never recorded."""
    placed = {
        "function": {
            "name": "place_order",
            "arguments": {
                "operation": operation,
                "sku": VANILLA["sku"],
                "quantity": VANILLA["quantity"],
            },
        }
    }
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": "Please order six tubs of vanilla (sku vanilla-tub) for the weekend.",
        },
        {"role": "assistant", "content": "", "tool_calls": [placed]},
        {
            "role": "user",
            "content": (
                "The worker running this conversation crashed right after that place_order "
                "call, and no reply from the supplier was recorded. Continue the task."
            ),
        },
    ]
