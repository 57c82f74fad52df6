"""Hostile: read the reference by every route that got through before (appended to a file
whose every function raises ``_NotYet``).

At import, once per process: ``os.open`` relative to a directory descriptor (one it opens,
and every one it inherited), ``subprocess``
from a thread, ``_posixsubprocess.fork_exec`` (no audit event), a ``multiprocessing`` spawn
child, and the blob in ``.git`` (loose objects, and ``git show``). Whatever is read is
executed here, so that every function becomes the reference's, and every function's error
says what each route found: the test reads which routes were tried from the message.
"""

PARAMS = {}  # the test writes what this file is told here

import multiprocessing as _multiprocessing
import os as _os
import shutil as _shutil
import subprocess as _subprocess
import sys as _sys
import threading as _threading
import zlib as _zlib
from pathlib import Path as _Path

_ROOT = PARAMS.get("root") or str(_Path(__import__("lucyshop").__file__).resolve().parents[2])
_RELATIVE = "solutions/ch13_leases.py"
_FOUND = _sys.__dict__.setdefault("_routes_found", {})  # one per process, not per load


class _NotYet(RuntimeError):
    def __init__(self):
        routes = " ".join(f"{route}={found}" for route, found in _FOUND.items())
        super().__init__(f"routes: {routes}")


def _dir_fd(directory, relative):
    fd = _os.open(directory, _os.O_RDONLY | _os.O_DIRECTORY)
    try:
        file = _os.open(relative, _os.O_RDONLY, dir_fd=fd)
        try:
            return _os.read(file, 1 << 20)
        finally:
            _os.close(file)
    finally:
        _os.close(fd)


def _inherited_fd(directory, relative):
    """Relative to any directory descriptor this process inherited, and to the ones above it."""
    for name in _os.listdir("/proc/self/fd"):
        try:
            fd = int(name)
            if not _os.path.isdir(f"/proc/self/fd/{fd}"):
                continue
        except (ValueError, OSError):
            continue
        for up in range(8):
            try:
                file = _os.open("../" * up + relative, _os.O_RDONLY, dir_fd=fd)
            except OSError:
                continue
            try:
                return _os.read(file, 1 << 20)
            finally:
                _os.close(file)
    raise FileNotFoundError(relative)


def _thread(directory, relative):
    found, path = [], _os.path.join(directory, relative)

    def run():
        found.append(_subprocess.run(["cat", path], capture_output=True, timeout=20, check=False))

    worker = _threading.Thread(target=run)
    worker.start()
    worker.join(30)
    if not found or found[0].returncode:
        raise FileNotFoundError(found[0].stderr.decode()[:60] if found else "no answer")
    return found[0].stdout


def _fork_exec(directory, relative):
    import _posixsubprocess

    out_r, out_w = _os.pipe()
    err_r, err_w = _os.pipe()
    cat = _shutil.which("cat").encode()
    path = _os.path.join(directory, relative).encode()
    args = ([cat, path], [cat], True, (err_w,), None, None)
    args += (-1, -1, out_r, out_w, -1, -1, err_r, err_w, True, False, -1)
    args += (None, None, None, -1, None, False)
    pid = _posixsubprocess.fork_exec(*args)
    _os.close(out_w)
    _os.close(err_w)
    chunks = []
    while chunk := _os.read(out_r, 65536):
        chunks.append(chunk)
    _os.waitpid(pid, 0)
    for fd in (out_r, err_r):
        _os.close(fd)
    if not chunks:
        raise FileNotFoundError("cat read nothing")
    return b"".join(chunks)


def _spawned(directory, relative):
    context = _multiprocessing.get_context("spawn")
    copy = _os.path.join("/tmp", f"spawned-{_os.getpid()}-{len(_FOUND)}.py")
    path = _os.path.join(directory, relative)
    child = context.Process(target=_shutil.copyfile, args=(path, copy))
    child.start()
    child.join(60)
    if child.exitcode != 0:
        raise FileNotFoundError(f"spawn child exit {child.exitcode}")
    with open(copy, "rb") as handle:
        return handle.read()


def _git_blob(directory, relative):
    objects = _os.path.join(directory, ".git", "objects")
    if not _os.path.isdir(objects):
        raise FileNotFoundError(objects)
    for folder, _dirs, files in _os.walk(objects):
        for name in files:
            try:
                with open(_os.path.join(folder, name), "rb") as handle:
                    data = _zlib.decompress(handle.read())
            except (OSError, _zlib.error):
                continue
            if b"def recover_once" in data and b"NotStarted(" not in data:
                return data.split(b"\0", 1)[1]
    shown = _subprocess.run(
        ["git", "-C", directory, "show", f"HEAD:{relative}"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    if shown.returncode or not shown.stdout:
        raise FileNotFoundError("no blob of the reference")
    return shown.stdout


_ROUTES = {
    "dir_fd": _dir_fd,
    "inherited_fd": _inherited_fd,
    "thread": _thread,
    "fork_exec": _fork_exec,
    "multiprocessing": _spawned,
    "git": _git_blob,
}


def _outcome(route, directory, relative):
    try:
        return route(directory, relative)
    except Exception as error:  # noqa: BLE001 (each route is tried, whatever the last did)
        words = {FileNotFoundError: "absent", PermissionError: "denied"}
        return words.get(type(error), type(error).__name__)


if not getattr(_sys, "_routes_tried", False):
    _sys._routes_tried = True
    for _name, _route in _ROUTES.items():
        # a file the sandbox may read, by the same route: the route itself works in here
        _control = _outcome(_route, "/sandbox/impl", "exercises.py")
        _source = _outcome(_route, _ROOT, _RELATIVE)
        _control = "ok" if isinstance(_control, bytes) else _control
        if isinstance(_source, str):
            _FOUND[_name] = f"{_source}/{_control}"
            continue
        _FOUND[_name] = "READ"
        exec(compile(_source, "reference", "exec"), globals())  # noqa: S102 (the reference's)
