"""The order the chapter's shop places again and again: six vanilla tubs at 450 cents (2700).

Stated once, here: the checkpoint, the experiment's tasks, the measured exercises, the
reference answers and the tests all propose this same dict, so a change reaches all of them.
"""

VANILLA = {"sku": "vanilla-tub", "quantity": 6, "unit_cents": 450}
VANILLA_CENTS = VANILLA["quantity"] * VANILLA["unit_cents"]  # 2700
