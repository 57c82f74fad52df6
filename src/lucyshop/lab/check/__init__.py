"""``make check`` (``python -m lucyshop.lab.check``): each chapter function's row, the checkpoint
and the exercises, with the guard around the student's code and the pytest plugin it reads.

``report`` puts one check together; ``subjects`` says what is checked (a ``Subject`` per row,
the rows set aside), ``suites`` runs the pytest children side by side, ``watcher`` the
checkpoint beside them, ``table`` turns outcomes into rows and lines, ``results`` holds the
result and its ``ch13-check/1`` JSON (``schemas/check.json``), ``guard`` bounds every child and
keeps the kit's files, and ``collect`` is the plugin inside each child."""
