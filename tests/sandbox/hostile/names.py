"""Hostile: names in the gradebook (appended to a file whose every function raises ``_named()``).

The class this file is handed in to (``test_hostile_names.py``) gives it the names a student
chooses: a folder called like a spreadsheet formula (``=HYPERLINK(...)``), a ``.py`` hand-in
starting with ``@`` and one with ``-``, and a folder whose name holds terminal escapes (a
window title, a screen clear, a colour). Beside them: a hand-in folder that is a symbolic link
to a classmate's, a ``.py`` hand-in that is a link to a classmate's file, a folder whose
``ch13_leases.py`` is such a link, and a FIFO named like a hand-in. Each function's error
carries the same: a formula and escapes, to reach the gradebook and the terminal through the
messages as well as the names.
"""

PARAMS = {}  # the test writes what this file is told here


def _named():
    """Every function fails with a message made to be run by a spreadsheet or a terminal."""
    raise ValueError(PARAMS["message"])
