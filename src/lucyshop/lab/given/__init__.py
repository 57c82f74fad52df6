"""What a chapter file and its answers are given: a student reads these but does not change them.

Everything an exercise answer may use from the lab is importable from here, each documented
where it lives: the shop the chapter runs (``VANILLA``, ``VANILLA_CENTS``, ``OWNER``,
``OPERATOR``, ``POLICY``: ``orders``), reading a shop back and holding a turn
(``exercise_kit``: ``chapter``, ``attempt``, ``rows``, ``HeldTurn``, ``dead_endpoint``, ...),
exercise 5's table of renewals (``RENEWAL_MIGRATIONS``, ``prepare_renewals``: ``renewals``),
``NotStarted`` (``stubs``), and two of the lab's process helpers, a real supplier process
(``supplier_process``) and waiting for an event (``wait_until``). ``pg_shop`` is exercise 7's
PostgreSQL shop.
"""

from typing import Any

from lucyshop.lab.given import exercise_kit
from lucyshop.lab.given.orders import OPERATOR, OWNER, POLICY, VANILLA, VANILLA_CENTS
from lucyshop.lab.given.renewals import RENEWAL_MIGRATIONS, prepare_renewals
from lucyshop.lab.given.stubs import NotStarted

__all__ = [
    "OPERATOR",
    "OWNER",
    "POLICY",
    "RENEWAL_MIGRATIONS",
    "VANILLA",
    "VANILLA_CENTS",
    "NotStarted",
    "exercise_kit",
    "prepare_renewals",
    "supplier_process",
    "wait_until",
]


def __getattr__(name: str) -> Any:
    """The two process helpers, imported on first use: every chapter file imports the lab (in
    the sandbox too), and that import need not start the lab's process machinery."""
    if name == "supplier_process":
        from lucyshop.lab.services.suppliers import supplier_process

        return supplier_process
    if name == "wait_until":
        from lucyshop.lab.services.processes import wait_until

        return wait_until
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
