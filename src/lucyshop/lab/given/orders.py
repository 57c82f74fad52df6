"""The shop the chapter runs again and again: the order it places (six vanilla tubs at 450
cents, 2700), the service name its workers run under, its one operator, and the spending
policy that names that operator.

Stated once, here: the checkpoint, the experiment's tasks, the measured exercises, the soak,
the reference answers and the tests all use these same values, so a change reaches all of
them.
"""

from lucyshop.approval import SpendingPolicy

VANILLA = {"sku": "vanilla-tub", "quantity": 6, "unit_cents": 450}
VANILLA_CENTS = VANILLA["quantity"] * VANILLA["unit_cents"]  # 2700
# Every worker, a replacement too, runs under this one service name: only generations differ,
# so a log, lock or holder check keyed on the name alone cannot tell them apart.
OWNER = "lucy-worker"
OPERATOR = "lucy"  # the one person the shop's policy lets approve and cancel
POLICY = SpendingPolicy(frozenset({OPERATOR}), total_cents=10_000, automatic_order_cents=5_000)
