"""The code that runs inside the sandbox, beside the student's module: nothing here is
trusted by the side that decides, and whatever it sends back is vetted on arrival (``remote``,
``wire``).

- ``worker``: loads the staged file and answers calls over the wire;
- ``shop_probes``, ``pg_probes``: what the trusted side hands, asks or does in that worker
  (a served shop connection, a connection of the worker's own, its clock, a race of claims);
- ``holder``, ``pg_holder``: the checkpoints' worker children, which claim the work and are
  killed, paused or released by the trusted side.

The trusted side names these modules by their dotted names (``worker.KIT``, the holders'
``python -m``); none of them imports a room above ``sandbox``.
"""
