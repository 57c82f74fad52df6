"""Hostile: paths that make the trusted side read what it must not (appended to the learner's
``exercises.py`` whose every function is written, and returns ``_answer()``).

The exercise tests read back the files an answer names. Here each answer names one that a
trusted reader must refuse:

- exercise 5: its receipt is ``/dev/zero`` (read whole, it grows the reader without end); its
  false-expiry shop is a FIFO in its scratch, its hung-turn shop a link to a database outside
  (``PARAMS["outside"]``);
- exercise 6: its receipt is a FIFO in its scratch (opened plainly, the reader waits for a
  writer that never comes); its shop is a link to that outside database, and its ledger the
  outside database itself, named by its own path;
- exercise 2: its ledger is the outside database too.

The outside database holds a secret (``PARAMS["secret"]``) in the rows the tests print when
they compare them: it must appear nowhere in what the check prints or keeps. Every other
function fails at once. Exercises 5 and 6 are graded from the trusted side's own runs, which
never call their measured answers: what those name must stay unread.
"""

PARAMS = {}  # the test writes what this file is told here

import os as _os
import sys as _sys


def _in_scratch(directory, name, make):
    """``directory/name`` made by ``make(path)`` (a FIFO, a link), the directory created."""
    _os.makedirs(directory, exist_ok=True)
    path = _os.path.join(directory, name)
    if not _os.path.lexists(path):
        make(path)
    return path


def _exercise_5(out, workdir):
    fifo_dir = _os.path.join(workdir, "false-expiry")
    _in_scratch(fifo_dir, "shop.db", _os.mkfifo)
    outside = _os.path.dirname(PARAMS["outside"])  # its shop.db: the outside database
    hung = _in_scratch(workdir, "hung", lambda path: _os.symlink(outside, path))
    shops = {"false-expiry": fifo_dir, "detection": fifo_dir, "hung": hung}
    turn = {"takeover_in_window": None, "hung": {"work_id": 1, "hung_at": 0.0}}
    observations = {"hung": {"unbounded": turn}}  # what the test reads before the shop
    return {"receipt": "/dev/zero", "figures": {}, "observations": observations, "shops": shops}


def _exercise_6(out, workdir):
    receipt = _in_scratch(workdir, "receipt.json", _os.mkfifo)
    shop = _in_scratch(workdir, "shop.db", lambda path: _os.symlink(PARAMS["outside"], path))
    return {"receipt": receipt, "figures": {}, "observations": {}, "shop": shop,
            "ledger_file": PARAMS["outside"]}  # fmt: skip


def _exercise_2(directory):
    worker = {"send_again": "PermissionError: stale", "completion": "PermissionError: stale"}
    part = {"worker": worker, "ledger_file": PARAMS["outside"], "operation": PARAMS["secret"]}
    return {"delayed_turn": {}, "accepted_order": part}


def _answer():
    """What the calling function answers: a hostile path for the measured exercises and
    exercise 2, a failure for the others."""
    caller = _sys._getframe(1)
    name, given = caller.f_code.co_name, caller.f_locals
    if name == "exercise_5_renewal":
        return _exercise_5(given["out"], given["workdir"])
    if name == "exercise_6_records":
        return _exercise_6(given["out"], given["workdir"])
    if name == "exercise_2_cancel_while_delayed":
        return _exercise_2(given["directory"])
    raise ValueError(f"{name} is not answered here")
