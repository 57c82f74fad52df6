"""Hostile: make the trusted side write outside the sandbox, or hang on a FIFO (appended to the
reference answers, so that every case and test gets as far as it can).

A trusted process that opens a file by name in a directory a sandbox may write follows
whatever the sandbox put there. From ``open_worker_shop``, which is told a path in such a
directory:

- in the checkpoint, where the trusted side writes the holder's ``child.err``, reads its
  ``ready.json`` and ``stale.json`` and copies the shop to ``shop-before-recovery.db`` in the
  case's directory: in case 2 each of those names becomes a symbolic link to
  ``PARAMS["outside"]/case2-<name>``, a directory of the test's that no sandbox can see; in
  case 3 and later each becomes a FIFO (a trusted side that opens one without care waits
  forever; the case's deadline must still end it);
- in the learner suite, where a test writes ``claimer.py`` and its contenders' ``p<N>.err``
  beside the shop: each becomes a link to ``PARAMS["outside"]/learner-<name>``.

At import it prints a line to its stderr: a holder's or a contender's stderr followed through a
link carries it outside. In a sandboxed worker it also makes the ``sandbox.log`` beside its
own log (the file the trusted side opens for the next worker it starts) a link to
``PARAMS["outside"]/sandbox-sandbox.log``, and writes a line through the sandbox's first
process's output; ``outlive_curve`` ends the worker, so that the next test starts another.
"""

PARAMS = {}  # the test writes what this file is told here

import os as _os
import re as _re
import sys as _sys

_NAMES = ("child.err", "ready.json", "stale.json", "shop-before-recovery.db")
_LEARNER = ("claimer.py", "p0.err", "p1.err", "p2.err", "p3.err")
_reference_open_worker_shop = open_worker_shop  # noqa: F821 (the reference's, above)


def _link(directory, names, prefix):
    for name in names:
        outside = _os.path.join(PARAMS["outside"], f"{prefix}-{name}")
        try:
            _os.symlink(outside, _os.path.join(directory, name))
        except OSError:
            continue


def _fifos(directory):
    for name in _NAMES:
        try:
            _os.mkfifo(_os.path.join(directory, name))
        except OSError:
            continue


def open_worker_shop(path, *args, **kwargs):
    directory = _os.path.dirname(_os.path.abspath(str(path)))
    case = _re.fullmatch(r"case(\d+)", _os.path.basename(directory))
    if case is None:
        _link(directory, _LEARNER, "learner")
    elif int(case.group(1)) == 2:
        _link(directory, _NAMES, "case2")
    elif int(case.group(1)) >= 3:
        _fifos(directory)
    return _reference_open_worker_shop(path, *args, **kwargs)


def outlive_curve(turns, leases):  # the reference's is not needed: the worker is restarted
    _os._exit(0)


def _link_the_next_workers_log():
    log = _sys.argv[-1] if _sys.argv and _sys.argv[-1].endswith("worker.log") else None
    if log is None:
        return
    run = _os.path.dirname(log)
    try:
        _os.unlink(_os.path.join(run, "sandbox.log"))
    except OSError:
        pass
    _link(run, ["sandbox.log"], "sandbox")
    try:
        fd = _os.open("/proc/1/fd/1", _os.O_WRONLY | _os.O_APPEND)
        _os.write(fd, f"{PARAMS['token']}: written through the sandbox's first process\n".encode())
        _os.close(fd)
    except OSError:
        pass


_link_the_next_workers_log()
print(f"{PARAMS['token']}: written by whoever opened my stderr", file=_sys.stderr)
