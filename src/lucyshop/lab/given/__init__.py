"""What a chapter file and its answers are given: a student reads these but does not change them.

Everything an exercise answer may use from the lab is importable from here, each documented
where it lives: the shop the chapter runs (``VANILLA``, ``VANILLA_CENTS``, ``OWNER``,
``OPERATOR``, ``POLICY``: ``orders``), loading the chapter, reading a shop back and holding a
turn (``exercise_kit``: ``load_chapter``, ``attempt``, ``rows``, ``lease_row``,
``outcome_row``, ``transcript_rows``, ``HeldTurn``, ``dead_endpoint``), exercise 5's table of
renewals (``RENEWAL_MIGRATIONS``, ``prepare_renewals``: ``renewals``), ``NotStarted``
(``stubs``), and two of the lab's process helpers, a real supplier process
(``supplier_process``) and waiting for an event (``wait_until``). ``pg_shop`` is exercise 7's
PostgreSQL shop. The one thing not here is what measures exercises 5 and 6
(``lucyshop.lab.exercises.runs``): it drives the experiment's workers, a room above this one.
"""

from typing import Any

from lucyshop.lab.given.exercise_kit import (
    HeldTurn,
    attempt,
    dead_endpoint,
    lease_row,
    load_chapter,
    outcome_row,
    rows,
    transcript_rows,
)
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
    "HeldTurn",
    "NotStarted",
    "attempt",
    "dead_endpoint",
    "lease_row",
    "load_chapter",
    "outcome_row",
    "prepare_renewals",
    "rows",
    "supplier_process",
    "transcript_rows",
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
