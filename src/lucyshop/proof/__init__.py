"""The kit's proof of itself: measurements of the kit, not lessons of the chapter.

``bench`` (``make bench``: the claim cycle beside other queues, the fence's cost, how long a
check and a graded class take), ``soak`` (``make soak``: seeded chaos against the invariants),
``testtime`` (``make test-time``: a whole make test, quiet and loaded) and ``gradescope`` (``make
autograder-proof``: the Gradescope zip on a bare Debian image). Their receipts are in
``proof/receipts/`` and their tests in ``proof/``.

Imports run one way: the proof uses the course (``lucyshop.lab``) and the runtime; neither
imports it (``[tool.importlinter]`` in pyproject.toml).
"""
