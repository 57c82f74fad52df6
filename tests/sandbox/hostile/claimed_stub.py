"""Hostile: NOT STARTED claimed by an exception's type (appended to a file whose every function
is written, and raises ``_claimed()``).

NOT STARTED excuses a row (and the checkpoint) from being FAILING, and ``make check`` treats
"not started" as success. Every function here is written (none is the stub by its syntax),
yet raises, in turn, the kit's own ``NotStarted`` naming itself, and a class of its own whose
module and name claim to be the kit's (``lucyshop.lab.given.stubs.NotStarted``), with the
function and section a stub would carry. Both come back from the sandbox as ``NotStarted``:
only the file's syntax may say a row is not started.
"""

PARAMS = {}  # the test writes what this file is told here

import sys as _sys

from lucyshop.lab.given.stubs import NotStarted as _KitNotStarted


class _ClaimsToBeTheStub(NotImplementedError):
    """Not the kit's class, but named like it wherever a type is described by name."""

    def __init__(self, function, section):
        super().__init__(f"{function}() is not started: read notebook {section}")
        self.function, self.section = function, section


_ClaimsToBeTheStub.__module__ = "lucyshop.lab.given.stubs"
_ClaimsToBeTheStub.__name__ = _ClaimsToBeTheStub.__qualname__ = "NotStarted"
_RAISED = []


def _claimed():
    """Raise a NotStarted for the calling function: the kit's own class, or the look-alike."""
    function = _sys._getframe(1).f_code.co_qualname
    _RAISED.append(function)
    kind = _KitNotStarted if len(_RAISED) % 2 else _ClaimsToBeTheStub
    raise kind(function, "13b § claimed, not a stub")
