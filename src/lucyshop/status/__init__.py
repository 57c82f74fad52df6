"""One screen about one shop, computed from its records at the moment you ask.

    python -m lucyshop status SHOP_DB [--supplier URL] [--identity NAME] [--workers FILE]
                                      [--impl learner|solutions|PATH] [--json]

Four signals, each read fresh from the shop file (opened read-only) or measured now:

- **service health**: does the supplier answer ``/health``, and how fast; which worker
  processes are alive, and which recorded holders' processes are gone. The shop records
  holders by owner label only, so liveness needs pids from somewhere: ``--workers FILE``
  (JSON ``{"owner": pid}``) or a ``workers(owner, pid)`` table if the shop has one. Without
  either the report says liveness is unknown rather than guess.
- **work progress**: work by state and outcome; every running item with its owner,
  generation and the seconds of lease left, or that it expired and may be taken over.
- **cancellation**: cancelled work, who cancelled it and why, and what was revoked.
- **external completion**: orders by status and the money; every SENDING or UNKNOWN order
  with its operation id, the cents it keeps reserved and what settles it (for finished work,
  the exact ``python -m lucyshop.lab.reconcile`` command).

Nothing here writes to the shop, and nothing here implements a chapter-13 function: the
report reads the tables those functions write.

The package, by role: ``signals`` (what the records say: ``collect`` returns every figure),
``render`` (the text screen; ``--json`` prints the figures as they are) and ``__main__`` (the
command line).
"""

from __future__ import annotations

from lucyshop.status.render import render
from lucyshop.status.signals import ShopUnreadable, collect, schema

__all__ = ["ShopUnreadable", "collect", "main", "render", "schema"]


def main(argv: list[str] | None = None) -> int:
    """The command, run in this process (the lab's demos print the screen this way).

    Imported when called: ``python -m lucyshop.status`` runs ``__main__`` itself, which must not
    be imported with the package first.
    """
    from lucyshop.status.__main__ import main as command

    return command(argv)
