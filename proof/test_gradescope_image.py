"""The Gradescope zip proved on a bare Debian image (``make autograder-proof``,
``lucyshop.proof.gradescope``): finding apt's mirror, the image without a Python, nothing
started in it outliving its run, and the committed receipt. The proof itself (a debootstrap
image, minutes) is ``make autograder-proof``; the tests that need its root filesystem tarball
skip, saying so, where it has not been built.
"""

from __future__ import annotations

import json
import os
import tarfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from lucyshop.lab.evidence import receipts
from lucyshop.lab.grade.gradescope import autograder
from lucyshop.lab.loader import ROOT
from lucyshop.proof.gradescope import stockimage

TARBALL = stockimage.BUILD / f"{stockimage.SUITE}-minbase.tar"
NO_IMAGE = f"no {TARBALL.relative_to(ROOT)}: `make autograder-proof` builds it (minutes, as root)"


# ---------------------------------------------------------------- the bare-image proof


def test_apts_mirror_is_found_in_either_format(tmp_path):
    one_line = tmp_path / "sources.list"
    one_line.write_text(
        "# deb http://old.example/debian bookworm main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb [signed-by=/k.gpg] http://mirror.example/debian bookworm main\n"
    )
    assert stockimage.debian_mirror([one_line]) == "http://mirror.example/debian"
    parts = tmp_path / "sources.list.d"
    parts.mkdir()
    (parts / "debian.sources").write_text(
        "Types: deb\nURIs: http://security.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n\n"
        "# a comment\nTypes: deb\nURIs: http://deb822.example/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert stockimage.debian_mirror([parts]) == "http://deb822.example/debian"
    with pytest.raises(stockimage.ProofError, match="--mirror"):
        stockimage.debian_mirror([parts], suite="trixie")


@pytest.mark.skipif(not TARBALL.is_file(), reason=NO_IMAGE)
def test_the_bare_image_has_no_python_for_setup_to_lean_on():
    assert stockimage.pythons_in(TARBALL) == []
    with tarfile.open(TARBALL) as archive:
        assert "./usr/bin/apt-get" in archive.getnames()


@pytest.mark.skipif(not TARBALL.is_file(), reason=NO_IMAGE)
@pytest.mark.skipif(os.geteuid() != 0, reason="entering the image needs root")
@pytest.mark.timeout(120)
def test_nothing_started_in_the_image_outlives_its_run_or_its_deadline(tmp_path):
    """A daemon left behind and a command past its deadline: both end with the run, and no
    mount is left on the root filesystem."""
    root = tmp_path / "root"
    hand_in = [stockimage.SUBMISSION[0]]
    stockimage.unpack(TARBALL, root, autograder.build(tmp_path / "autograder.zip"), hand_in)
    marker = f"lucyshop-stockimage-test-{os.getpid()}"

    def daemons() -> list[int]:  # the daemon itself, named by its argv[0]
        found = psutil.process_iter(["pid", "cmdline"])
        return [p.info["pid"] for p in found if (p.info["cmdline"] or [""])[0] == marker]

    seen: list[int] = []
    watching = threading.Event()

    def watch() -> None:
        while not watching.wait(0.1):
            seen.extend(daemons())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    daemon = f"(exec -a {marker} sleep 300) & sleep 1; echo started"
    try:
        ran = stockimage.in_image(root, ["bash", "-c", daemon], timeout=60, log=tmp_path / "a.log")
    finally:
        watching.set()
        watcher.join(timeout=10)
    assert ran.exit_status == 0 and "started" in (tmp_path / "a.log").read_text()
    assert seen, "the daemon never ran: the test would prove nothing"
    stuck = stockimage.in_image(root, ["sleep", "300"], timeout=2, log=tmp_path / "b.log")
    assert stuck.exit_status is None and stuck.seconds < 30
    time.sleep(0.5)
    assert daemons() == []
    mounted = [m.mountpoint for m in psutil.disk_partitions(all=True)]
    assert not [m for m in mounted if Path(m).is_relative_to(root)]
    stockimage.remove_tree(root)


# ---------------------------------------------------------------- the committed evidence

EVIDENCE = stockimage.EVIDENCE


def test_the_committed_run_passed_within_gradescopes_defaults():
    """make autograder-proof's evidence: a bare image set up by setup.sh, the reference graded
    in full, under half a core, in under 600 s and 768 MiB."""
    assert receipts.validate(EVIDENCE, "gradescope-run") == []
    found = json.loads(EVIDENCE.read_text())
    assert found["passed"] and all(found["conditions"].values()), found["conditions"]
    assert found["image"]["pythons_before_setup"] == []
    assert found["image"]["pythons_after_setup"]
    run, limits = found["run"], found["limits"]
    assert limits == {"wall_seconds": 600, "memory_bytes": 768 * 2**20, "cpu_cores": 0.5}
    assert run["quota"]["cpu_quota_us"] * 2 == run["quota"]["cpu_period_us"]
    assert run["seconds"] <= 600 and run["exit_status"] == 0
    # the cgroup's peak where the kernel kept one (the summed resident size of the processes
    # counts each shared library once per process, so it is only the fallback)
    peak = run["peak_cgroup_bytes"] or run["peak_tree_rss_bytes"]
    assert peak < limits["memory_bytes"] and not run["oom_kills"], run
    assert found["results"]["full_score"] and found["results"]["valid"]
    assert found["kit"]["commit"]
