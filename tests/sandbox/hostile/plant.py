"""Hostile: plant files that outlive the check (appended to a file whose every function raises
``_Planted``, whose message says what each plant met).

At import, once per process, it tries: a ``conftest.py`` and a ``shlex.py`` in the kit's root, a
``.pth`` in the virtual environment, a poisoned ``__pycache__`` file for the kit's
``check/results.py``, which writes the check's result (stamped with the source's own mtime and
size, so Python would load it), and a ``.git/hooks`` script. Every planted file carries
``PARAMS["token"]`` and is harmless should it land (the shlex.py runs the real one; the .pyc is
the real module plus one constant; the hook exits 0); the test looks for the token and removes
anything that carries it.
"""

PARAMS = {}  # the test writes what this file is told here

import importlib.util as _importlib_util
import os as _os
import py_compile as _py_compile
import sys as _sys
import sysconfig as _sysconfig
from pathlib import Path as _Path

_TOKEN = PARAMS.get("token", "hostile-plant")
_ROOT = _Path(PARAMS.get("root") or _Path(__import__("lucyshop").__file__).resolve().parents[2])
_MET = _sys.__dict__.setdefault("_plants_met", {})  # one per process, not per load


class _Planted(RuntimeError):
    def __init__(self):
        met = " ".join(f"{name}={found}" for name, found in _MET.items())
        super().__init__(f"plants: {met}")


_SHLEX = f"""# {_TOKEN}
import os as _os
import sysconfig as _sysconfig

_real = _os.path.join(_sysconfig.get_paths()["stdlib"], "shlex.py")
with open(_real) as _source:
    exec(compile(_source.read(), _real, "exec"))
"""


def _write(path, text, mode=0o644):
    path = _Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _pyc():
    """results.py's cache entry: the real module plus one constant, with the source's stamp."""
    source = _ROOT / "src" / "lucyshop" / "lab" / "check" / "results.py"
    target = _Path(_importlib_util.cache_from_source(str(source)))
    poisoned = _Path("/tmp") / f"results-{_os.getpid()}.py"
    poisoned.write_text(source.read_text() + f"\n_PLANTED = {_TOKEN!r}\n")
    stat = source.stat()
    _os.utime(poisoned, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    _py_compile.compile(str(poisoned), cfile=str(target), dfile=str(source), doraise=True)


def _plants():
    purelib = PARAMS.get("purelib") or _sysconfig.get_paths()["purelib"]
    return {
        "conftest": lambda: _write(_ROOT / "conftest.py", f"# {_TOKEN}\n"),
        "shlex": lambda: _write(_ROOT / "shlex.py", _SHLEX),
        "pth": lambda: _write(_Path(purelib) / f"zz_{_TOKEN}.pth", f"# {_TOKEN}\n"),
        "pycache": _pyc,
        "hook": lambda: _write(
            _ROOT / ".git" / "hooks" / "post-checkout", f"#!/bin/sh\n# {_TOKEN}\nexit 0\n", 0o755
        ),
    }


if not getattr(_sys, "_planted", False):
    _sys._planted = True
    for _name, _plant in _plants().items():
        try:
            _plant()
        except OSError as _error:
            _MET[_name] = f"{type(_error).__name__}({_error.errno})"
        else:
            _MET[_name] = "PLANTED"
