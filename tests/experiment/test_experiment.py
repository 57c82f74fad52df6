"""The Part A experiment: a real quick run's receipt is verified, and verifying catches edits
and every condition of a sound run failing.

The quick run is real (embedded SmolLM2, worker and replacement processes, SIGKILL) and runs
once per module; it takes a minute or more on two cores. A doctored copy keeps its figures
consistent with its observations (they are recomputed), so only the condition under test fails.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from model_lock import one_model_at_a_time
from shop_fixtures import free_port

from lucyshop import IMPL_ENV
from lucyshop.lab.experiment.overhead import summary
from lucyshop.lab.experiment.receipt import RULES, figures, verify
from lucyshop.lab.loader import ROOT, load_impl
from lucyshop.lab.services.processes import wait_until

EXPERIMENT = [sys.executable, "-m", "lucyshop.lab.experiment"]
COMMITTED = ROOT / "evidence" / "ch13-leases-receipt.json"
# Deadlines far past the work, not measures of it: the quick run takes about a minute on a quiet
# 2-core machine and several beside 8 CPU burners; verifying a receipt, seconds.
RUN_SECONDS = 1800
CHECK_SECONDS = 300
TOKENS = 8  # the quick run's token cap per turn


@pytest.fixture(scope="module")
def quick_receipt(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (the 'model' extra)")
    out = tmp_path_factory.mktemp("experiment") / "receipt.json"
    # 8-token turns: every phase runs as in --quick, in two thirds of the time (shorter turns,
    # shorter leases); the tests weigh the pipeline and the verifying, not the model's replies.
    argv = [*EXPERIMENT, "--out", str(out), "--quick", "--max-tokens", str(TOKENS)]
    with one_model_at_a_time(request):
        done = python([*argv, "--impl", "solutions"], timeout=RUN_SECONDS)
    print(done.stdout)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def python(
    argv: list[str], *, timeout: float, **options: object
) -> subprocess.CompletedProcess[str]:
    """Run a command from the repository root, bounded, capturing its text."""
    return subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False, **options
    )


def run_verify(path: Path, impl: str = "solutions") -> subprocess.CompletedProcess[str]:
    return python([*EXPERIMENT, "verify", str(path), "--impl", impl], timeout=CHECK_SECONDS)


@pytest.mark.timeout(RUN_SECONDS + 60)
def test_quick_run_observes_every_phase_and_is_verified(quick_receipt: Path) -> None:
    receipt = json.loads(quick_receipt.read_text())
    observed, settings = receipt["observations"], receipt["settings"]
    assert (settings["pilot_turns"], settings["trials_per_rule"], settings["quick"]) == (6, 3, True)
    assert settings["max_tokens"] == TOKENS
    assert len(observed["pilot"]) == 6 and len(observed["pilot_after"]) == 3
    assert all(turn["seconds"] > 0 and turn["tokens"] > 0 for turn in observed["pilot"])
    assert all(turn["ended"] > turn["started"] for turn in observed["pilot"])
    for rule in ("median", "p90", "twice_max"):
        trials = observed["false_expiry"][rule]["trials"]
        assert len(trials) == 3 and {row["rule"] for row in trials} == {rule}
        assert all(row["outcome"]["status"] == "DONE" for row in trials)  # read back from the shop
        assert receipt["figures"]["false_expiry"][rule]["stale_completions_accepted"] == 0
    # one worker ran the rules interleaved, the order rotating each round
    order = sorted(
        (row["trial"], rule) for rule in RULES for row in observed["false_expiry"][rule]["trials"]
    )
    assert [rule for _, rule in order[:3]] != [rule for _, rule in order[3:6]]
    assert len(observed["control"]["trials"]) == 3
    for name in ("detection", "detection_short"):
        kills = observed[name]["trials"]
        assert [row["exit_status"] for row in kills] == [-9, -9]
        assert all(row["takeover"]["took_at"] >= row["expires"] for row in kills)
    assert len(next(iter(observed["recovery"]["models"].values()))["samples"]) == 3
    assert receipt["provenance"]["loadavg_start"] and receipt["provenance"]["loadavg_end"]
    assert len(receipt["settings"]["model"]["sha256"]) == 64

    checked = run_verify(quick_receipt)
    assert checked.returncode == 0, checked.stdout
    assert "ok       pilot.p50 = " in checked.stdout
    assert "ok       detection.measured_mean_delay = " in checked.stdout
    assert "ok       false_expiry.median.p_value = " in checked.stdout
    assert "ok       detection.predicted_from_kill_moments = " in checked.stdout
    assert "ok       turn_times.mann_whitney.p_value = " in checked.stdout
    assert "ok       detection_slope.measured_slope = " in checked.stdout
    assert "ok       control.stale_writes = " in checked.stdout
    overhead = receipt["provenance"]["blocker_overhead"]
    assert len(overhead["plain"]) == len(overhead["blocked"]) == overhead["pairs"] == 2
    assert overhead["same_tokens"] and overhead["order"] == "alternating"
    assert "ok       blocker_overhead.measured_share = " in checked.stdout
    assert "ok       blocker: both sides of every pair generated the same tokens" in checked.stdout
    assert checked.stdout.rstrip().splitlines()[-1].startswith("receipt verification passed")


def blocker_failures(out: str) -> list[str]:
    """The blocker's failed lines. A quick receipt read as a full one is also held to what a
    quick run cannot promise (a stale write, its drift): those lines are not the blocker's."""
    return [line for line in out.splitlines() if line.startswith("FAILING  blocker")]


@pytest.mark.timeout(RUN_SECONDS + 60)
def test_a_blocker_that_costs_more_than_two_percent_fails_a_full_receipt(
    quick_receipt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Blocked turns 10% slower, with figures consistent with them: only the target fails."""
    receipt = json.loads(quick_receipt.read_text())
    receipt["settings"]["quick"] = False  # a quick run's overhead is only shown
    overhead = receipt["provenance"]["blocker_overhead"]
    for slow, fast in zip(overhead["blocked"], overhead["plain"], strict=True):
        slow["seconds"] = fast["seconds"] * 1.1
    overhead.update(summary(overhead))
    slower = tmp_path / "slower.json"
    slower.write_text(json.dumps(receipt))
    assert verify(slower, load_impl("solutions")) == 1
    out = capsys.readouterr().out
    assert "FAILING  blocker: timed turns do not show more than 2% (median +10.00%, " in out
    assert "ok       blocker: costs at most 2% of a turn by its mechanism" in out
    assert len(blocker_failures(out)) == 1 and "FAILING  blocker_overhead" not in out


@pytest.mark.timeout(RUN_SECONDS + 60)
def test_a_blocker_whose_audit_events_cost_more_than_two_percent_fails_a_full_receipt(
    quick_receipt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Turns timed alike, but each raising a million audited opens that the blocker makes
    10 us dearer each: the mechanism fails."""
    receipt = json.loads(quick_receipt.read_text())
    receipt["settings"]["quick"] = False
    overhead = receipt["provenance"]["blocker_overhead"]
    probes = overhead["probe_seconds"]
    probes["plain"]["open"] = 1e-6
    probes["blocked"]["open"] = 11e-6
    for turn, plain in zip(overhead["blocked"], overhead["plain"], strict=True):
        turn["seconds"], turn["events"] = plain["seconds"], {"open": 1_000_000}
    overhead.update(summary(overhead))
    costly = tmp_path / "costly.json"
    costly.write_text(json.dumps(receipt))
    assert verify(costly, load_impl("solutions")) == 1
    out = capsys.readouterr().out
    assert "FAILING  blocker: costs at most 2% of a turn by its mechanism" in out
    assert len(blocker_failures(out)) == 1


@pytest.mark.timeout(RUN_SECONDS + 60)
def test_an_edited_overhead_figure_fails_verification(
    quick_receipt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    receipt = json.loads(quick_receipt.read_text())
    receipt["provenance"]["blocker_overhead"]["measured_share"] = 0.0
    receipt["provenance"]["blocker_overhead"]["blocked"][0]["seconds"] *= 2
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(receipt))
    assert verify(edited, load_impl("solutions")) == 1
    said = capsys.readouterr().out
    assert "FAILING  blocker_overhead.measured_share: the receipt says 0.0" in said


@pytest.mark.timeout(RUN_SECONDS + 60)
def test_a_tampered_figure_fails_verification_naming_it(
    quick_receipt: Path, tmp_path: Path
) -> None:
    receipt = json.loads(quick_receipt.read_text())
    receipt["figures"]["pilot"]["p50"] += 0.001
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(receipt))
    checked = run_verify(tampered)  # the command line: a failing receipt exits 1
    assert checked.returncode == 1, checked.stdout
    out = checked.stdout
    assert "FAILING  pilot.p50: the receipt says" in out
    assert "FAILED: 1 of" in out and f"verify {tampered}" in out


SUPERSEDED = "generation 1 of work 1 is superseded by 2"


def take_over(row: dict, *, refusal: str | None = SUPERSEDED) -> dict:
    """Make ``row`` a trial whose work generation + 1 took over just before the holder's writes
    and held until after them; each write refused with ``refusal`` (None: accepted)."""
    first, last = row["writes"][0]["at"], row["writes"][-1]["at"]
    row["takeover"] = {
        "work_id": row["work_id"],
        "generation": row["generation"] + 1,
        "worker_id": f"{row['owner']}#{row['generation'] + 1}",
        "took_at": first - 0.1,
        "committed_at": first - 0.05,
        "expires": last + 10,
        "finished": {"write": "outcome", "at": last + 1, "accepted": True, "refusal": None},
    }
    for write in row["writes"]:
        write["accepted"], write["refusal"] = refusal is None, refusal
    row["finish"] = "accepted" if refusal is None else "refused"
    row["refusal"] = refusal
    return row


def _trial(observed: dict, rule: str = "median") -> dict:
    return observed["false_expiry"][rule]["trials"][0]


def _stale_accepted(observed: dict) -> None:
    take_over(_trial(observed), refusal=None)


def _refused_by_state(observed: dict) -> None:
    take_over(_trial(observed), refusal="work 1 is finished, not running")


def _stale_after_the_replacement_finished(observed: dict) -> None:
    row = take_over(_trial(observed))
    row["takeover"]["finished"]["at"] = row["writes"][0]["at"] - 0.01


def _another_owner_label(observed: dict) -> None:
    take_over(_trial(observed))["takeover"]["worker_id"] = "replacement#2"


def _control_refused(observed: dict) -> None:
    take_over(observed["control"]["trials"][0])


def _untimed_turn(observed: dict) -> None:
    del observed["pilot"][0]["started"]


def _kinds_apart(observed: dict) -> None:
    _trial(observed, "p90")["kind"] = "a kind no other rule met"


def _another_lease(observed: dict) -> None:
    _trial(observed, "p90")["lease"] += 0.5


def _not_killed(observed: dict) -> None:
    observed["detection_short"]["trials"][0]["exit_status"] = 0


def _detected_late(observed: dict) -> None:
    for row in observed["detection"]["trials"]:
        row["takeover"]["took_at"] += row["lease"] / 2


# Each condition of verify: the doctoring that breaks it, and the FAILING lines that follow (by
# their start); no other line may fail.
BROKEN = {
    "stale completion accepted": (
        _stale_accepted,
        [
            "FAILING  false_expiry.median: stale completions accepted is 0 (saw 1)",
            "FAILING  fence: every stale write refused by the generation (",
        ],
    ),
    "refused by another comparison": (
        _refused_by_state,
        ["FAILING  fence: every stale write refused by the generation ("],
    ),
    "stale write after the replacement finished": (
        _stale_after_the_replacement_finished,
        ["FAILING  fence: generation + 1 held the work at every stale write ("],
    ),
    "another owner label": (
        _another_owner_label,
        ["FAILING  fence: the replacement used the holder's owner label"],
    ),
    "control refused": (
        _control_refused,
        ["FAILING  control: every stale write accepted ("],
    ),
    "turn without its start": (_untimed_turn, ["FAILING  turns: every turn has its start"]),
    "rules met other kinds": (_kinds_apart, ["FAILING  trials: the three rules met the same task"]),
    "trial under another lease": (
        _another_lease,
        ["FAILING  false_expiry.p90: every trial ran under the lease"],
    ),
    "worker not killed": (
        _not_killed,
        ["FAILING  detection_short: every worker died of SIGKILL"],
    ),
    "slope": (_detected_late, ["FAILING  detection: the delay grows with the lease at slope"]),
}


def doctored(receipt: dict, change: object, tmp_path: Path) -> Path:
    """A copy of ``receipt`` with ``change`` applied to its observations and its figures
    recomputed from them, so that its arithmetic still holds."""
    forged = copy.deepcopy(receipt)
    change(forged["observations"])
    forged["figures"] = figures(forged["observations"], forged["settings"], load_impl("solutions"))
    path = tmp_path / "doctored.json"
    path.write_text(json.dumps(forged))
    return path


@pytest.mark.timeout(RUN_SECONDS + 60)
@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_each_condition_of_a_sound_run_can_fail(
    quick_receipt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: str
) -> None:
    change, lines = BROKEN[broken]
    receipt = json.loads(quick_receipt.read_text())
    assert verify(doctored(receipt, change, tmp_path), load_impl("solutions")) == 1
    failed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAIL")]
    assert len(failed) == len(lines), failed
    for start in lines:
        assert any(line.startswith(start) for line in failed), (start, failed)


def _drifted(observed: dict, factor: float, capped: bool = True) -> None:
    """The pilot repeated after the trials, ``factor`` times as long per token; every turn of
    both pilots capped (else none)."""
    for turn in observed["pilot"]:
        turn["tokens"] = TOKENS if capped else TOKENS - 1
    observed["pilot_after"] = copy.deepcopy(observed["pilot"])
    for turn in observed["pilot_after"]:
        turn["seconds"] *= factor


@pytest.mark.timeout(RUN_SECONDS + 60)
@pytest.mark.parametrize(
    ("factor", "capped", "line"),
    [
        (1.5, True, "FAILING  drift: seconds per token on capped turns moved +50.0% from the"),
        (1.1, True, "ok       drift: seconds per token on capped turns moved +10.0% from the"),
        (1.0, False, "FAILING  drift: fewer than 3 capped turns in a pilot, so it cannot be"),
    ],
)
def test_a_full_run_is_held_to_its_drift_and_a_quick_one_is_not(
    quick_receipt: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    factor: float,
    capped: bool,
    line: str,
) -> None:
    receipt = json.loads(quick_receipt.read_text())
    receipt["settings"]["quick"] = False
    verify(
        doctored(receipt, lambda o: _drifted(o, factor, capped), tmp_path), load_impl("solutions")
    )
    assert line in capsys.readouterr().out
    receipt["settings"]["quick"] = True
    verify(doctored(receipt, lambda o: _drifted(o, 1.5), tmp_path), load_impl("solutions"))
    out = capsys.readouterr().out
    assert "ok       drift: +50.0%; a quick run's pilots are too short to be held to it" in out


EXPIRED = "the lease of worker#1 on work 1 has expired"  # the reference's words


@pytest.mark.timeout(RUN_SECONDS + 60)
@pytest.mark.parametrize("raced", [True, False])
def test_a_write_that_raced_the_claims_commit_is_no_stale_write(
    quick_receipt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], raced: bool
) -> None:
    """The replacement's claim reads its clock (took_at), then waits for the write lock; a
    holder's write begun before the claim committed may win that lock and meet its own expired
    lease. Such a write is no stale write; one begun after the commit that is refused by
    expiry, not by the generation, fails the fence (a CI run met the first on a loaded machine)."""
    receipt = json.loads(quick_receipt.read_text())

    def expired_finish(observed: dict) -> None:
        row = take_over(_trial(observed))
        finish = row["writes"][-1]
        finish["refusal"] = row["refusal"] = EXPIRED
        took = row["takeover"]
        took["took_at"] = finish["at"] - 0.01
        took["committed_at"] = finish["at"] + (0.01 if raced else -0.005)

    verify(doctored(receipt, expired_finish, tmp_path), load_impl("solutions"))
    out = capsys.readouterr().out
    fence = "FAILING  fence: every stale write refused by the generation ("
    assert (fence in out) is not raced, out


@pytest.mark.timeout(RUN_SECONDS + 60)
def test_a_full_run_without_a_stale_write_fails_both_fences(
    quick_receipt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A quick run is too small to promise a takeover; a full one must show the fence and the
    control each meeting at least one stale write, or it tested neither."""
    receipt = json.loads(quick_receipt.read_text())
    receipt["settings"]["quick"] = False

    def no_takeovers(observed: dict) -> None:
        for row in [
            *(row for phase in observed["false_expiry"].values() for row in phase["trials"]),
            *observed["control"]["trials"],
        ]:
            row["takeover"] = None
            for write in row["writes"]:
                write["accepted"], write["refusal"] = True, None

    assert verify(doctored(receipt, no_takeovers, tmp_path), load_impl("solutions")) == 1
    out = capsys.readouterr().out
    assert "FAILING  fence: at least one stale write was made (saw 0)" in out
    assert "FAILING  control: at least one stale write was made (saw 0)" in out


@pytest.mark.timeout(RUN_SECONDS + 60)
@pytest.mark.parametrize(
    ("figure", "bump"),
    [
        (("false_expiry", "p90", "p_value"), 0.01),
        (("detection", "predicted_from_kill_moments"), 0.001),
        (("turn_times", "mann_whitney", "p_value"), 0.01),
    ],
)
def test_an_edited_surprise_figure_fails_verification(
    quick_receipt: Path,
    tmp_path: Path,
    figure: tuple[str, ...],
    bump: float,
    capsys: pytest.CaptureFixture[str],
) -> None:
    receipt = json.loads(quick_receipt.read_text())
    *parents, leaf = figure
    holder = receipt["figures"]
    for key in parents:
        holder = holder[key]
    holder[leaf] = holder[leaf] - bump if holder[leaf] >= bump else holder[leaf] + bump
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(receipt))
    assert verify(edited, load_impl("solutions")) == 1
    assert f"FAILING  {'.'.join(figure)}: the receipt says" in capsys.readouterr().out


@pytest.mark.timeout(RUN_SECONDS + 60)
def test_verify_uses_the_named_implementation_and_learner_by_default(
    quick_receipt: Path, tmp_path: Path
) -> None:
    stubs = run_verify(quick_receipt, impl="learner")
    if stubs.returncode == 3:  # the learner file is the kit's stubs
        assert "NOT STARTED" in stubs.stderr and "--impl solutions" in stubs.stderr
    # No --impl and no $LEASES_IMPL (make test sets it): the learner's file.
    unset = {k: v for k, v in os.environ.items() if k != IMPL_ENV}
    default = python([*EXPERIMENT, "verify", str(quick_receipt)], timeout=CHECK_SECONDS, env=unset)
    assert (default.returncode, default.stderr) == (stubs.returncode, stubs.stderr)


@pytest.mark.timeout(RUN_SECONDS + 60)
def test_plots_never_load_an_implementation(quick_receipt: Path, tmp_path: Path) -> None:
    """Drawn with the reference blocked and the learner's stubs named: the plots read the
    receipt and nothing else."""
    drawn = python(
        [
            sys.executable,
            "-m",
            "lucyshop.lab.blocked",
            "lucyshop.lab.experiment.plots",
            str(quick_receipt),
            "--out-dir",
            str(tmp_path),
        ],
        timeout=CHECK_SECONDS,
        env={**os.environ, IMPL_ENV: "learner"},
    )
    assert drawn.returncode == 0, drawn.stderr
    assert (tmp_path / "ch13-outlive-curve.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.timeout(RUN_SECONDS + 60)
def test_plots_are_drawn_from_the_quick_receipt(quick_receipt: Path, tmp_path: Path) -> None:
    drawn = python(
        [
            sys.executable,
            "-m",
            "lucyshop.lab.experiment.plots",
            str(quick_receipt),
            "--out-dir",
            str(tmp_path),
        ],
        timeout=CHECK_SECONDS,
    )
    assert drawn.returncode == 0, drawn.stderr
    for name in ("ch13-outlive-curve.png", "ch13-detection-delays.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000


def test_the_committed_receipt_is_verified() -> None:
    if not COMMITTED.exists():
        pytest.skip(f"{COMMITTED.relative_to(ROOT)} is not there yet")
    checked = run_verify(COMMITTED)
    failed = [line for line in checked.stdout.splitlines() if line.startswith("FAIL")]
    assert failed == [] and checked.returncode == 0, checked.stdout[-3000:]
    receipt = json.loads(COMMITTED.read_text())
    assert receipt["settings"]["backend"] == "embedded" and not receipt["settings"]["quick"]
    assert [
        receipt["figures"]["false_expiry"][rule]["trials"]
        for rule in ("median", "p90", "twice_max")
    ] == [24, 24, 24]
    # the fence was tested where the generation alone decides, and the control let it through
    fence, control = receipt["figures"]["fence"], receipt["figures"]["control"]
    assert fence["stale_writes"] > 0 and fence["refused_by"] == {
        "generation": fence["stale_writes"]
    }
    assert control["stale_writes"] > 0 and control["accepted"] == control["stale_writes"]


def test_no_ollama_server_is_one_sentence_and_exit_2(tmp_path: Path) -> None:
    pytest.importorskip("ollama", reason="the 'ollama' extra is not installed")
    host = f"127.0.0.1:{free_port()}"  # bound, then closed: nothing listens
    out = tmp_path / "receipt.json"
    done = python(
        [*EXPERIMENT, "--out", str(out), "--impl", "solutions"]
        + ["--backend", "ollama", "--model", "qwen2.5:0.5b"],
        timeout=CHECK_SECONDS,
        env={**os.environ, "OLLAMA_HOST": host},
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Ollama" in lines[0] and "ollama pull qwen2.5:0.5b" in lines[0]
    assert not out.exists()


KILLED_RUNS = {
    "exercise-5": [str(ROOT / "solutions" / "exercises.py"), "5", "--quick"],
    "experiment": ["-m", "lucyshop.lab.experiment", "--quick", "--impl", "solutions"],
}


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("command", sorted(KILLED_RUNS))
def test_a_kill_of_a_measured_run_ends_the_workers_it_started(
    command: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """SIGTERM to the measuring process alone (not its process group): the worker processes
    it started end with it, none left running orphaned."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (the 'model' extra)")
    argv = [sys.executable, *KILLED_RUNS[command], "--out", str(tmp_path / "receipt.json")]
    with one_model_at_a_time(request):
        run = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            started = wait_until(
                lambda: psutil.Process(run.pid).children(recursive=True),
                timeout=600,
                what="the run's first worker",
            )
            run.send_signal(signal.SIGTERM)
            assert run.wait(timeout=300) == 128 + signal.SIGTERM
            _gone, alive = psutil.wait_procs(started, timeout=60)
            assert alive == [], f"left running: {[p.cmdline() for p in alive]}"
        finally:
            if run.poll() is None:
                run.kill()
                run.wait(timeout=10)
