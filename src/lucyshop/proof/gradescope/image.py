"""The bare image the proof starts from: Debian ``minbase`` from apt's own mirror, no Python.

``stockimage`` proves the Gradescope zip on what Gradescope starts from, so the image must hold
nothing the kit's ``setup.sh`` should install itself. Here: find the mirror this machine's apt
uses, ``debootstrap`` once into a tarball kept for reruns, say which Pythons a tarball holds
(none, in a minbase one), and unpack it with the zip as ``/autograder/source`` and a hand-in
as ``/autograder/submission``, as Gradescope lays them out. Apart from the run and the
limits, since none of it needs a namespace or a cgroup and each step is tested alone.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import psutil

SUITE = "bookworm"  # Debian 12: the suite whose mirror the kit's machines are set up with
SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
# Certificate authorities this machine adds to Debian's (a network that re-signs TLS): copied
# into the image, where installing ca-certificates trusts them, so that pip reaches PyPI.
LOCAL_CAS = Path("/usr/local/share/ca-certificates")
DEBOOTSTRAP_SECONDS = 900.0


class ProofError(RuntimeError):
    """The proof could not be run here (not the autograder failing it): says why."""


def debian_mirror(sources: Iterable[Path] = SOURCES, suite: str = SUITE) -> str:
    """The URI of the first ``deb`` entry for ``suite`` in apt's sources (both formats)."""
    files: list[Path] = []
    for source in sources:
        if source.is_dir():
            files += sorted(p for p in source.iterdir() if p.suffix in (".list", ".sources"))
        elif source.is_file():
            files.append(source)
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        entries = _deb822(text) if path.suffix == ".sources" else _one_line(text)
        for types, uris, suites in entries:
            if "deb" in types and suite in suites and uris:
                return uris[0]
    named = ", ".join(map(str, files)) or "nothing"
    raise ProofError(f"no 'deb' entry for Debian {suite} in {named}: pass --mirror URL")


def _one_line(text: str) -> list[tuple[list[str], list[str], list[str]]]:
    """``deb [options] URI SUITE COMPONENT...`` lines."""
    entries = []
    for line in text.splitlines():
        line = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0])
        words = line.split()
        if len(words) >= 3:
            entries.append(([words[0]], [words[1]], [words[2]]))
    return entries


def _deb822(text: str) -> list[tuple[list[str], list[str], list[str]]]:
    """Stanzas of ``Types:``, ``URIs:`` and ``Suites:`` fields, separated by blank lines."""
    entries = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, list[str]] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line:
                continue
            name, value = line.split(":", 1)
            fields[name.strip().lower()] = value.split()
        if fields.get("enabled", ["yes"]) != ["no"]:
            entries.append(
                (fields.get("types", []), fields.get("uris", []), fields.get("suites", []))
            )
    return entries


def pristine(cache: Path, mirror: str, *, fresh: bool = False) -> Path:
    """The tarball of a bare ``debootstrap --variant=minbase`` root filesystem, made once."""
    tarball = cache / f"{SUITE}-minbase.tar"
    if tarball.is_file() and not fresh:
        return tarball
    work = cache / "debootstrap"
    remove_tree(work)
    print(f"stockimage: debootstrap --variant=minbase {SUITE} from {mirror}", flush=True)
    argv = ["debootstrap", "--variant=minbase", SUITE, str(work), mirror]
    done = subprocess.run(
        argv, check=False, capture_output=True, text=True, timeout=DEBOOTSTRAP_SECONDS
    )
    if done.returncode != 0:
        raise ProofError(f"debootstrap failed ({done.returncode}): {done.stdout[-2000:]}")
    partial = tarball.with_suffix(".tar.partial")
    tar = ["tar", "--numeric-owner", "--xattrs", "-C", str(work), "-cf", str(partial), "."]
    subprocess.run(tar, check=True, timeout=DEBOOTSTRAP_SECONDS)
    partial.replace(tarball)
    remove_tree(work)
    return tarball


def pythons_in(tarball: Path) -> list[str]:
    """The Python interpreters a root filesystem tarball holds (none in a minbase one)."""
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    return sorted(n for n in names if re.search(r"(^|/)usr/(local/)?bin/python[0-9.]*$", n))


def unpack(tarball: Path, root: Path, zip_path: Path, hand_in: Sequence[Path]) -> None:
    """A fresh root filesystem at ``root``: the image, the zip as /autograder/source, and the
    hand-in as /autograder/submission."""
    remove_tree(root)
    root.mkdir(parents=True)
    tar = ["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-xf", str(tarball)]
    subprocess.run(tar, check=True, timeout=DEBOOTSTRAP_SECONDS)
    source = root / "autograder" / "source"
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(source)
    for name in ("setup.sh", "run_autograder"):
        (source / name).chmod(0o755)  # Gradescope keeps the zip's modes; extractall does not
    shutil.copy2(source / "run_autograder", root / "autograder" / "run_autograder")  # as it does
    submission = root / "autograder" / "submission"
    submission.mkdir(parents=True)
    for path in hand_in:
        shutil.copy2(path, submission / path.name)


def trust_local_cas(root: Path, cas: Path = LOCAL_CAS) -> list[str]:
    """Copy this machine's local certificate authorities into the image; return their names.

    Only the network of the machine running the proof needs them (Gradescope's does not):
    Debian's ca-certificates, which setup.sh installs, trusts what it finds in this folder.
    """
    found = sorted(p for p in cas.glob("*.crt") if p.is_file()) if cas.is_dir() else []
    inside = root / cas.relative_to("/")
    inside.mkdir(parents=True, exist_ok=True)
    for path in found:
        shutil.copy2(path, inside / path.name)
    return [path.name for path in found]


def remove_tree(path: Path) -> None:
    """Remove ``path``, refusing while anything is mounted inside it."""
    if not path.exists():
        return
    inside = [m.mountpoint for m in psutil.disk_partitions(all=True)]
    inside = [m for m in inside if Path(m).is_relative_to(path.resolve())]
    if inside:
        raise ProofError(f"{path} still has mounts inside it ({', '.join(inside)}): not removed")
    shutil.rmtree(path)
