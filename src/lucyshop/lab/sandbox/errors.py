"""What a failure in the sandbox becomes on the trusted side: our exceptions, never the worker's.

A call that fails in the worker comes back as a description (module, type name, message, a
few plain attributes); ``rebuilt`` makes it one of ours from the type's name alone: the kit's
and the standard library's own types from a fixed list (so ``pytest.raises(ValueError)``
works on a student's ``ValueError``), ``NotStarted`` as itself, anything else as a
``StudentError`` that reads as the student's type name. Nothing from the worker is unpickled,
imported or executed. The call's own failures (``CallTimedOut``, ``WorkerDied``,
``TimedOutBefore``) are here too: they are what ``make check`` says of a call. Kept apart from
``remote`` (the worker's lifecycle) because ``lab.check`` reads these types without a sandbox.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import keyword
from typing import Any

from lucyshop.lab.given.stubs import NotStarted

STUDENT_CHARS = 2000  # at most this much of a message from the sandbox is kept


class StudentError(Exception):
    """An exception of a type this side does not rebuild (the student's own, say)."""

    remote_type = "Exception"


class CallTimedOut(TimeoutError):
    """A call into the sandbox ran past its deadline; the worker was killed."""

    def __init__(self, function: str, seconds: float) -> None:
        super().__init__(f"timed out after {seconds:g} s in {function}()")
        self.function, self.seconds = function, seconds


class WorkerDied(RuntimeError):
    """The worker ended (os._exit, a signal, a crash) while running a call."""

    def __init__(self, function: str, status: int | None, said: str = "") -> None:
        how = "was killed" if status is None or status < 0 else f"exited with status {status}"
        told = f"; the sandbox said: {said}" if said else ""
        super().__init__(
            f"the process running {function}() {how} (os._exit, a signal or a crash){told}"
        )
        self.function, self.said = function, said


class TimedOutBefore(RuntimeError):
    """A function that already hung or ended its worker, failing fast in later tests."""

    def __init__(self, function: str) -> None:
        self.function = function
        super().__init__(f"{function}() hung or ended the process in an earlier test")


# The exception types rebuilt as themselves; every other type becomes a StudentError.
_BUILTIN = (
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "BlockingIOError",
    "BrokenPipeError",
    "ChildProcessError",
    "ConnectionAbortedError",
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "EOFError",
    "FileExistsError",
    "FileNotFoundError",
    "FloatingPointError",
    "InterruptedError",
    "ImportError",
    "IndexError",
    "IsADirectoryError",
    "KeyError",
    "LookupError",
    "MemoryError",
    "ModuleNotFoundError",
    "NameError",
    "NotADirectoryError",
    "NotImplementedError",
    "OSError",
    "OverflowError",
    "PermissionError",
    "ProcessLookupError",
    "RecursionError",
    "RuntimeError",
    "TimeoutError",
    "TypeError",
    "UnboundLocalError",
    "UnicodeError",
    "ValueError",
    "ZeroDivisionError",
)
_KNOWN_PLACES = {
    "sqlite3": "Error DatabaseError IntegrityError OperationalError ProgrammingError"
    " InterfaceError DataError NotSupportedError Warning",
    "lucyshop.store": "WriteLockTimeout",
    "lucyshop.supplier.client": "SupplierUnavailable SupplierRefused",
    "lucyshop.models": "ModelUnavailable ModelRefused",
    "lucyshop.lab.loader": "ReferenceBlocked",
}


@functools.cache
def known() -> dict[tuple[str, str], type[BaseException]]:
    """The exception types rebuilt as themselves, by (module, name): built once a process (the
    checkpoint starts a sandbox per case), and only read."""
    found: dict[tuple[str, str], type[BaseException]] = {
        ("builtins", name): getattr(builtins, name) for name in _BUILTIN
    }
    for module, names in _KNOWN_PLACES.items():
        owner = importlib.import_module(module)
        for name in names.split():
            found[(module, name)] = getattr(owner, name)
    return found


_STUDENT_TYPES: dict[str, type[StudentError]] = {}


def student_error_type(name: str) -> type[StudentError]:
    """A StudentError subclass that reads as the student's type name in a message."""
    name = name.rpartition(".")[2]
    if not name.isidentifier() or keyword.iskeyword(name) or len(name) > 60:
        name = "StudentError"
    if name not in _STUDENT_TYPES:
        _STUDENT_TYPES[name] = type(name, (StudentError,), {"remote_type": name})
    return _STUDENT_TYPES[name]


def short(value: Any) -> str:
    """A string from the sandbox, cut to ``STUDENT_CHARS``; anything else as empty."""
    return value[:STUDENT_CHARS] if isinstance(value, str) else ""


def rebuilt(
    error: Any, *, known: dict[tuple[str, str], type[BaseException]], shown: str
) -> BaseException:
    """The worker's exception as one of ours (see the module's docstring); ``shown`` is how a
    ``NotStarted`` names the student's file."""
    if not isinstance(error, dict):
        return StudentError("an exception the sandbox could not describe")
    module, name = short(error.get("module")), short(error.get("type"))
    message = short(error.get("message"))
    attrs = error.get("attrs") if isinstance(error.get("attrs"), dict) else {}
    if (module, name) == ("lucyshop.lab.given.stubs", "NotStarted"):
        function, section = short(attrs.get("function")), short(attrs.get("section"))
        found: BaseException = NotStarted(function, section, where=shown)
    else:
        cls = known.get((module, name))
        if cls is None:
            found = student_error_type(name)(message)
        else:
            found = cls.__new__(cls)
            BaseException.__init__(found, message)
            for attr in ("status", "error"):
                if attr in attrs:
                    setattr(found, attr, attrs[attr])
    where = error.get("where")
    if isinstance(where, list) and len(where) == 3 and type(where[2]) is int:
        found.sandbox_where = (short(where[0]), short(where[1]), where[2])
    return found
