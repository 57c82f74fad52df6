"""Hostile students against the machine that runs ``make check``: harm that would outlive the
run, a run that never ends, and output that lies.

- Planted files: a ``conftest.py`` and a ``shlex.py`` in the kit's root, a ``.pth`` in the
  virtual environment, a poisoned ``__pycache__`` file, a ``.git/hooks`` script. Afterwards the
  kit is as it was (``git status --porcelain --ignored`` of those paths, the venv's ``.pth``
  files, the hooks) and a run on the untouched stubs still says NOT STARTED, exit 3.
- Links and FIFOs planted wherever a trusted process opens a file by name in a directory a
  sandbox may write (the checkpoint's case directory, a learner test's ``tmp_path``, the
  worker's own run directory): nothing is written outside the sandbox's scratch, and the
  run still ends.
- A daemon holding the run's output, an environment secret, terminal escapes and a disk fill,
  in one file run as ``make check | cat``: it ends, with its own last line; no secret; every
  escape shown, not sent; the fill bounded and gone.

Each hostile file is under ``hostile/``; anything that carries a test's token is removed
afterwards, wherever it landed.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sysconfig
import uuid
from pathlib import Path

import pytest
from hostile_checks import (
    MARKS,
    SECRET_NAME,
    du,
    hand_in,
    hostile,
    leftovers,
    reference,
    run_check,
    short_tmpdir,
    with_bodies,
    with_stubs,
)
from sandbox_files import ROOT

from lucyshop.lab.check import results
from lucyshop.lab.check.guard import DISK_LIMIT
from lucyshop.lab.check.subjects import FUNCTIONS
from lucyshop.lab.sandbox.jail import TMP_BYTES

pytestmark = MARKS

FAST = ("--no-measured", "--test-timeout=20")
LEARNER = ROOT / "learner"
MB = 1024 * 1024


# ------------------------------------------------------------------ planted files


def planted_paths(token: str) -> dict[str, Path]:
    """Where ``hostile/plant.py`` plants each file (the real kit: a sandbox must stop it)."""
    return {
        "conftest": ROOT / "conftest.py",
        "shlex": ROOT / "shlex.py",
        "pth": Path(sysconfig.get_paths()["purelib"]) / f"zz_{token}.pth",
        # the module that writes each row's result: a poisoned cache of it could forge any grade
        "pycache": Path(importlib.util.cache_from_source(results.__file__)),
        "hook": ROOT / ".git" / "hooks" / "post-checkout",
    }


def git_status(*paths: Path) -> str:
    relative = [str(path.relative_to(ROOT)) for path in paths]
    return subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--", *relative],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def kit_state(paths: dict[str, Path]) -> dict[str, object]:
    """What a planted file would change: the targeted root paths' git status, the venv's
    ``.pth`` files and the hooks (a cache entry is looked at for the token alone: the kit's
    own processes may rewrite it at any time)."""
    purelib, hooks = Path(sysconfig.get_paths()["purelib"]), paths["hook"].parent
    return {
        "git": git_status(paths["conftest"], paths["shlex"]),
        "pth": sorted(p.name for p in purelib.glob("*.pth")),
        "hooks": sorted(p.name for p in hooks.iterdir()) if hooks.is_dir() else "no hooks",
    }


def carrying(paths: dict[str, Path], token: str) -> list[str]:
    """Each planted path that now holds ``token``, removed (a cache entry is rebuilt)."""
    found = []
    for name, path in paths.items():
        try:
            if token.encode() in path.read_bytes():
                found.append(name)
                path.unlink()
        except OSError:
            continue
    return found


def stubs(directory: Path) -> Path:
    return hand_in(directory, (LEARNER / "ch13_leases.py").read_text(encoding="utf-8"))


def test_planted_files_do_not_outlive_the_check(tmp_path):
    """A warm-up run on the stubs first (every cache the kit makes exists), then the
    hostile file, then the untouched stubs again."""
    token = f"hostile-plant-{uuid.uuid4().hex[:12]}"
    paths = planted_paths(token)
    untouched = stubs(tmp_path / "stubs")
    with short_tmpdir() as tmpdir:
        warm = run_check(untouched, tmpdir, *FAST, "--no-checkpoint")
        assert warm.status == 3, warm.output[-3000:]
        before = kit_state(paths)
        text = with_bodies("raise _Planted()") + hostile("plant", token=token, root=str(ROOT))
        try:
            checked = run_check(
                hand_in(tmp_path / "hostile", text), tmpdir, *FAST, "--no-checkpoint"
            )
            after = kit_state(paths)
        finally:
            landed = carrying(paths, token)
        left = leftovers(checked.marker, str(tmpdir))
        later = run_check(untouched, tmpdir, *FAST)
        left += leftovers(later.marker, str(tmpdir))
    assert landed == [], f"planted in the kit: {landed}"
    assert after == before
    assert checked.status == 1, checked.output[-3000:]
    message = checked.rows()["percentile"]["failures"][0]["message"]
    for name in paths:
        assert f"{name}=" in message and f"{name}=PLANTED" not in message, message
    assert later.status == 3, later.output[-3000:]
    assert later.functions() == with_stubs("NOT STARTED"), later.functions()
    assert later.data["checkpoint"]["status"] == "NOT STARTED", later.data["checkpoint"]
    assert left == [], left


# ------------------------------------------------------------------ links and FIFOs


@pytest.fixture(scope="module")
def links_and_fifos(tmp_path_factory):
    """The reference, planting links and FIFOs wherever the trusted side of the checkpoint
    and of the learner suite opens a file by name in a directory the sandbox may write
    (``hostile/links_and_fifos.py``)."""
    directory = tmp_path_factory.mktemp("links")
    outside = directory / "outside"  # no sandbox sees it
    outside.mkdir()
    token = f"hostile-link-{uuid.uuid4().hex[:12]}"
    text = reference() + hostile("links_and_fifos", outside=str(outside), token=token)
    with short_tmpdir() as tmpdir:
        args = (*FAST, "--case-timeout=20", "--checkpoint-timeout=240")
        checked = run_check(hand_in(directory, text), tmpdir, *args, timeout=420)
        left = leftovers(checked.marker, str(tmpdir))
    return checked, outside, left


def written_outside(outside: Path, prefix: str) -> dict[str, str]:
    return {
        path.name: path.read_text(encoding="utf-8", errors="replace")[:200]
        for path in outside.glob(f"{prefix}-*")
    }


def test_the_checkpoint_follows_no_planted_link(links_and_fifos):
    _checked, outside, _left = links_and_fifos
    assert written_outside(outside, "case2") == {}


def test_the_learner_suite_follows_no_planted_link(links_and_fifos):
    _checked, outside, _left = links_and_fifos
    assert written_outside(outside, "learner") == {}


def test_the_sandbox_follows_no_planted_log_link(links_and_fifos):
    _checked, outside, _left = links_and_fifos
    assert written_outside(outside, "sandbox") == {}


def test_a_fifo_where_the_checkpoint_writes_costs_one_case_deadline(links_and_fifos):
    """Links and FIFOs in its own directories cost the file its claim test (the contenders'
    script is a link), outlive_curve (it ends the worker) and the checkpoint, nothing more:
    the run ends, every other row is graded."""
    checked, _outside, left = links_and_fifos
    assert checked.status == 1, checked.output[-3000:]
    functions, lost = checked.functions(), ("claim", "outlive_curve")
    assert {f: s for f, s in functions.items() if f not in lost} == {
        f: "PASSING" for f in FUNCTIONS if f not in lost
    }, functions
    checkpoint = checked.data["checkpoint"]
    assert checkpoint["status"] == "FAILING", checkpoint
    # a case's deadline stopped it, never the whole checkpoint's (not a measure of the clock:
    # the run's own verdict on what stopped it)
    assert "did not finish within" not in json.dumps(checkpoint), checkpoint
    cases = {case["case"]: case for case in checkpoint["cases"]}
    assert [cases[n]["passed"] for n in (0, 1)] == [True, True], checkpoint
    assert not any(cases[n]["passed"] for n in range(3, 7)), checkpoint
    assert left == [], left


# ------------------------------------------------------------------ daemon, secret, escapes, fill


FAKE = "16/16 functions PASSING · checkpoint PASSING · exercises: forged by a daemon"
DAEMON_SECONDS = 600  # how long the daemon of hostile/noisy.py sleeps, holding the output


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    """``make check | cat`` of a file that leaves a daemon, hunts for a secret, prints
    escapes and fills the disk; the run's own directory measured after it ends."""
    directory = tmp_path_factory.mktemp("noisy")
    token = f"hostile-noisy-{uuid.uuid4().hex[:12]}"
    secret = f"secret-{uuid.uuid4().hex}"
    with short_tmpdir() as tmpdir:
        params = {"tmp": str(tmpdir), "token": token, "secret_name": SECRET_NAME, "fake": FAKE}
        text = with_bodies("raise _Noise()") + hostile("noisy", **params)
        try:
            checked = run_check(
                hand_in(directory, text),
                tmpdir,
                *FAST,
                "--no-checkpoint",
                env={SECRET_NAME: secret},
                timeout=DAEMON_SECONDS - 60,  # a run that waited for the daemon is killed
                through_cat=True,
            )
            left = leftovers(checked.marker, token, str(tmpdir))
            kept = du(tmpdir)
            private = Path("/tmp", token).exists()  # the sandbox's /tmp is its own
        finally:
            subprocess.run(["rm", "-rf", str(Path("/tmp", token))], check=False)
    return checked, secret, left, kept, private


def test_a_daemon_cannot_hold_the_output_or_print_the_last_line(noisy):
    checked, _secret, left, _kept, _private = noisy
    # ended by itself (a run that waited for the daemon, which sleeps DAEMON_SECONDS holding
    # the output, would have been killed at its timeout: no status)
    assert checked.status == 1, checked.output[-3000:]
    lines = [line for line in checked.output.splitlines() if line.strip()]
    assert lines[-1] == checked.data["summary"], lines[-3:]
    assert FAKE not in checked.output
    assert left == [], left


def test_no_secret_of_the_environment_reaches_the_feedback(noisy):
    checked, secret, _left, _kept, _private = noisy
    assert secret not in checked.everything()
    message = checked.rows()["percentile"]["failures"][0]["message"]
    assert "secret: none" in message, message  # it looked, and found nothing


def test_terminal_escapes_are_shown_never_sent(noisy):
    checked, _secret, _left, _kept, _private = noisy
    output = checked.output
    assert not any(char in output for char in "\x1b\x07\x9b\r"), repr(output[-2000:])
    assert "\\x1b[2K" in output and "\\x07" in output and "\\x9b" in output
    assert not any(char in checked.data["feedback"] for char in "\x1b\x07\x9b")


def test_escapes_in_an_import_error_are_shown_never_sent(tmp_path):
    """The one line of a file that cannot be imported quotes the student's message."""
    text = 'raise ValueError("\\x1b[2K\\x1b[1G  percentile  PASSING  24/24\\x07")\n'
    with short_tmpdir() as tmpdir:
        checked = run_check(hand_in(tmp_path, text), tmpdir, *FAST)
        left = leftovers(checked.marker, str(tmpdir))
    assert checked.status == 2, checked.output[-3000:]
    assert not any(char in checked.output for char in "\x1b\x07"), repr(checked.output)
    assert "\\x1b[2K\\x1b[1G  percentile  PASSING  24/24\\x07" in checked.output
    assert left == [], left


def test_a_disk_fill_is_bounded_and_gone_after_the_check(noisy):
    checked, _secret, _left, kept, private = noisy
    assert not private, "the sandbox's /tmp was the machine's"
    row = checked.rows()["detection_delay"]
    message = row["message"] + " " + " ".join(f["message"] for f in row["failures"])
    filled = [int(size) for size in re.findall(r"'(\d+)MB", message)]
    stopped = f"wrote over {DISK_LIMIT >> 20} MiB to its scratch" in message
    # Either the run stopped the fill at its scratch's limit (weighed four times a second),
    # or every place it reached refused it at the private /tmp's size.
    assert stopped or (filled and all(size * MB <= TMP_BYTES for size in filled)), message
    assert kept < 64 * MB, f"{kept // MB} MB left in the run's TMPDIR"
