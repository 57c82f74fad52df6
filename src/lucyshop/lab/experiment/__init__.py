"""Part A, measured: how often a lease outlives a live worker, whether the generation fences
the stale writes that follow, and how long a crash goes unseen.

``python -m lucyshop.lab.experiment --out FILE`` runs its phases on real model turns (a
pilot; the three lease rules' trials interleaved in one worker, with a replacement of the same
owner label that holds what it takes over; the same trials against a copy without the
generation fence; the pilot again; detection under two leases; recovery from a crashed
transcript) with real worker processes and a real SQLite shop, and writes a receipt with every
raw observation. ``python -m lucyshop.lab.experiment verify FILE`` recomputes every figure in a
receipt from those observations.

The modules: ``worker`` (the child processes), ``renewer`` (exercise 5's renewer hook for the
workers), ``phases`` (the parent's side of each phase), ``control`` (the
unfenced copy, and which comparison refused a write), ``overhead`` (what the reference blocker
costs on a turn), ``receipt`` (figures and their verification), ``run`` (the phases in order) and
``plots`` (its two figures). What the model is asked, and which model answers, are
``lucyshop.lab.model``. Provenance, the write and the comparison are the kit's one receipt
engine, ``lucyshop.lab.evidence.receipts``.
"""
