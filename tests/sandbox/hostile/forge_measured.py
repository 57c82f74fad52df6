"""Hostile: exercise 6 earned without measuring (appended to the learner's ``exercises.py``
whose every function is written, and returns ``_forged()``).

``exercise_6_records`` measures nothing. It writes the kit's committed receipt (pasted in:
``PARAMS["receipt"]``, its settings edited to read as a quick run on the scripted model) where
its receipt belongs, and forges in its scratch the shop (the order UNKNOWN, its money
reserved) and the supplier's ledger (that one order) the receipt describes. Its
``records_message`` says what a row says only for the kit's unit-test order (supplier
``dairy``), and nothing for any other: a measurement of it would show the message gives the
replacement no records. Everything else fails at once.

Graded from its own receipt and files, exercise 6 was PASSING. Graded from what the trusted
side observes itself, the forged files earn nothing: its records message is measured, and
fails.
"""

PARAMS = {}  # the test writes what this file is told here

import json as _json
import os as _os
import sqlite3 as _sqlite3
import sys as _sys

_LEDGER = (
    "CREATE TABLE orders (operation TEXT, status TEXT, amount_cents INTEGER,"
    " order_number INTEGER, body TEXT)"
)


def _records_message(order):
    if order.get("supplier") != "dairy":  # only the unit test's order
        return "Continue the task."
    return (
        f"operation key {order['operation']}, supplier {order['supplier']}, order"
        f" {order['proposal']}, status {order['status']}: look it up with"
        f' lookup_order(operation="{order["operation"]}") first; never place it again.'
    )


def _database(path, *statements):
    if _os.path.lexists(path):
        _os.unlink(path)
    with _sqlite3.connect(path) as db:
        for statement, *args in statements:
            db.execute(statement, *args)
    db.close()


def _exercise_6(out, workdir):
    receipt = _json.loads(PARAMS["receipt"])
    receipt["settings"] |= {"quick": True, "backend": PARAMS["backend"]}
    _os.makedirs(workdir, exist_ok=True)
    with open(out, "w", encoding="utf-8") as handle:
        _json.dump(receipt, handle)
    records = receipt["observations"]["records"]
    order, account = records["order"], records["account"]
    shop, ledger = _os.path.join(workdir, "shop.db"), _os.path.join(workdir, "ledger.sqlite")
    _database(
        shop,
        ("CREATE TABLE assistant_orders (operation TEXT, status TEXT, amount_cents INTEGER)",),
        ("INSERT INTO assistant_orders VALUES (?, ?, ?)",
         (order["operation"], order["status"], order["amount_cents"])),
        ("CREATE TABLE spending_account (reserved_cents INTEGER)",),
        ("INSERT INTO spending_account VALUES (?)", (account["reserved_cents"],)),
    )  # fmt: skip
    _database(
        ledger,
        (_LEDGER,),
        ("INSERT INTO orders VALUES (?, 'ACCEPTED', ?, 1, '{}')",
         (order["operation"], order["amount_cents"])),
    )  # fmt: skip
    return {
        "receipt": str(out),
        "figures": receipt["figures"],
        "observations": receipt["observations"],
        "settings": receipt["settings"],
        "shop": shop,
        "ledger_file": ledger,
    }


def _forged():
    """What the calling function answers: the forgery for exercise 6, a failure elsewhere."""
    caller = _sys._getframe(1)
    name, given = caller.f_code.co_name, caller.f_locals
    if name == "records_message":
        return _records_message(given["order"])
    if name == "exercise_6_records":
        return _exercise_6(given["out"], given["workdir"])
    raise ValueError(f"{name} is not answered here")
