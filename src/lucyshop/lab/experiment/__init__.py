"""Part A, measured: how often a lease outlives a live worker, and how long a crash goes unseen.

``python -m lucyshop.lab.experiment --out FILE`` runs four phases on real model turns (a pilot,
false expiry, detection, recovery from a crashed transcript) with real worker processes and a
real SQLite shop, and writes a receipt with every raw observation. ``python -m
lucyshop.lab.experiment verify FILE`` recomputes every figure in a receipt from those
observations.

The modules: ``worker`` (the child processes), ``renewer`` (exercise 5's renewer hook for the
workers), ``phases`` (the parent's side of each phase), ``overhead`` (what the reference blocker
costs on a turn), ``receipt`` (figures and their verification), ``run`` (the phases in order) and
``plots`` (its two figures). What the model is asked, and which model answers, are
``lucyshop.lab.model``. Provenance, the write and the comparison are the kit's one receipt
engine, ``lucyshop.lab.evidence.receipts``.
"""
