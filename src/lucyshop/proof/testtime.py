"""How long ``make test`` takes, quiet and under load: timed runs of the kit's whole pytest suite.

    python -m lucyshop.proof.testtime [--out FILE] [--bench FILE] [--log FILE]
                                      [--burners N] [--settle SECONDS]
                                      [-- extra pytest arguments]

``measure()`` times one run; the command prints its entry and writes it into ``--out`` under
``quiet`` (no burners) or ``loaded`` (``--burners N``: N processes that spin a core each run
beside the suite from before it starts until it ends), keeping the other run already there, so
one file holds the quiet figure and the proof that the suite holds under load. A quiet run
also goes into the bench's report, ``bench.json`` (``--bench``), as its ``make_test`` section.
Both writes go through the receipt engine. Each entry carries the receipt engine's provenance
(host, date, command, cores, load average at the start and the end, and the sha256 of the
files that set how the suite runs), the counts pytest printed, the burners, and the load
average sampled while the suite ran, since a duration means little without the load it was
measured under. The machine's busy CPU-seconds over the run go with them: spread over every
core, a quiet run's are the least time the same suite could take here (``floor_seconds``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lucyshop import IMPL_ENV
from lucyshop.lab.evidence import receipts
from lucyshop.lab.loader import ROOT
from lucyshop.proof.machine import cores, machine_cpu

SUMMARY = re.compile(r"^=*\s*(\d+ (passed|failed|errors?|skipped|deselected)\b.*?)\s*=*$")
FAILURE = re.compile(r"^(FAILED|ERROR) \S")
COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?)")
DEADLINE_SECONDS = 3600.0
SAMPLE_SECONDS = 5.0  # how often the load average is read while the suite runs
SETTLE_SECONDS = 60.0  # burners spin this long before a loaded run starts: the 1-minute
# load average then shows the load the suite starts under
BURN = "while True: pass"
RUNS = ("quiet", "loaded")
# What sets how make test runs (its workers, the order, the plugins, every test's guard): their
# sha256s in a run's provenance say which configuration it timed. Set-up files, so a change to
# one is reported by make evidence-status, never failed on (lucyshop.lab.evidence.pins).
SUITE_FILES = (
    "Makefile",
    "pyproject.toml",
    "tests/conftest.py",
    "tests/schedule.py",
    "spec/conftest.py",
    "proof/conftest.py",
)
ENVIRONMENT = {IMPL_ENV: "solutions"}


def pytest_command(extra: Sequence[str] = ()) -> list[str]:
    """What ``make test`` runs (the solutions, quiet), with ``extra`` pytest arguments."""
    return [sys.executable, "-m", "pytest", "-q", "--color=no", *extra]


def _summary(output: str) -> str:
    """pytest's last line of counts, e.g. ``812 passed, 3 skipped in 290.1s``."""
    for line in reversed(output.splitlines()):
        if match := SUMMARY.match(line.strip()):
            return match.group(1)
    return ""


def failures(output: str) -> list[str]:
    """The ids pytest's short summary names as failed or in error, so a receipt of a run that did
    not pass says which tests did not (the log that held them is overwritten by the next run)."""
    return [
        line.split(" ", 1)[1].split(" - ")[0] for line in output.splitlines() if FAILURE.match(line)
    ]


def counts(summary: str) -> dict[str, int]:
    """The counts of a summary line: ``{"passed": 812, "skipped": 3, "failed": 0, "errors": 0}``
    (failed and errors always present, so a reader never mistakes a missing key for zero)."""
    found = {"passed": 0, "failed": 0, "errors": 0}
    for number, word in COUNT.findall(summary):
        word = {"error": "errors", "warning": "warnings"}.get(word, word)
        found[word] = found.get(word, 0) + int(number)
    return found


def pytest_seconds(summary: str) -> float | None:
    """The seconds pytest itself printed (``... in 290.12s``), without start-up and set-up."""
    match = re.search(r"\bin ([0-9.]+)s\b", summary)
    return float(match.group(1)) if match else None


class LoadSampler:
    """Reads the 1-minute load average every ``every`` seconds in a thread, until stopped."""

    def __init__(self, every: float = SAMPLE_SECONDS) -> None:
        self.every, self.samples = every, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append(round(os.getloadavg()[0], 2))

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, Any]:
        """The 1-minute load average while the suite ran: samples, mean and highest."""
        samples = self.samples or [round(os.getloadavg()[0], 2)]
        return {
            "every_seconds": self.every,
            "samples": len(samples),
            "mean": round(sum(samples) / len(samples), 2),
            "max": max(samples),
        }


@contextmanager
def burners(n: int, *, settle: float = 0.0, nice: int = 0) -> Iterator[list[int]]:
    """``n`` processes that spin a core each (``python -c 'while True: pass'``), running for the
    whole block and ended when it ends, however it ends; ``settle`` seconds of spinning first;
    ``nice`` added to their niceness (19: they take only what nothing else wants)."""
    if n < 0:
        raise ValueError(f"burners are 0 or more, not {n}")
    argv = ["nice", "-n", str(nice)] if nice else []
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(n):
            procs.append(
                subprocess.Popen([*argv, sys.executable, "-c", BURN], stdin=subprocess.DEVNULL)
            )
        if n and settle > 0:
            time.sleep(settle)
        yield [proc.pid for proc in procs]
    finally:
        for proc in procs:
            proc.kill()  # a burner holds nothing: no grace needed
        for proc in procs:
            proc.wait(timeout=30)


def measure(
    extra: Sequence[str] = (),
    *,
    timeout: float = DEADLINE_SECONDS,
    log: Path | None = None,
    burn: int = 0,
    settle: float = 0.0,
    sample_every: float = SAMPLE_SECONDS,
) -> dict[str, Any]:
    """Run the suite once on the solutions, beside ``burn`` CPU burners, and return its
    duration and what pytest printed.

    ``log`` keeps pytest's whole output, to read what failed when the run did not pass."""
    command = pytest_command(extra)
    with burners(burn, settle=settle) as pids:
        started = receipts.provenance(command=command[1:], code=[ROOT / f for f in SUITE_FILES])
        with LoadSampler(sample_every) as sampler:
            cpu = machine_cpu()
            done = subprocess.run(
                command,
                cwd=ROOT,
                env=os.environ | ENVIRONMENT,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            cpu = round(machine_cpu() - cpu, 1)
        provenance = receipts.finish(started)
    if log is not None:
        log.write_text(done.stdout + done.stderr)
    summary = _summary(done.stdout)
    return {
        "provenance": provenance,
        "environment": ENVIRONMENT,
        "pytest_seconds": pytest_seconds(summary),
        "exit_status": done.returncode,
        "passed": done.returncode == 0,
        "summary": summary,
        "counts": counts(summary),
        "failures": failures(done.stdout),
        "burners": len(pids),
        "settle_seconds": settle if pids else 0.0,
        "cpu_seconds": cpu,
        "cores": cores(),
        # A quiet run's least possible duration here; beside burners, theirs is in cpu_seconds.
        **({} if pids else {"floor_seconds": round(cpu / cores(), 1)}),
        "load_average_during": sampler.summary(),
    }


def kind_of(entry: Mapping[str, Any]) -> str:
    """``loaded`` for a run beside burners, else ``quiet``."""
    return "loaded" if entry.get("burners") else "quiet"


def read_runs(path: Path) -> dict[str, Any]:
    """The runs a test-time file holds, by kind. A missing file holds none."""
    if not path.exists():
        return {}
    data = dict(receipts.read_receipt(path))
    return {kind: data[kind] for kind in RUNS if kind in data}


def record(path: Path, entry: Mapping[str, Any]) -> dict[str, Any]:
    """Put ``entry`` into the file at ``path`` under its kind, keeping the other kind's run."""
    runs = read_runs(path) | {kind_of(entry): dict(entry)}
    data = {kind: runs[kind] for kind in RUNS if kind in runs}
    receipts.write_receipt(path, data)
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.proof.testtime", description=__doc__.split("\n", 1)[0]
    )
    parser.add_argument("--out", type=Path, help="also record the run in this file")
    parser.add_argument("--bench", type=Path, help="also put a quiet run into this bench report")
    parser.add_argument("--log", type=Path, help="keep pytest's whole output here")
    parser.add_argument(
        "--burners", type=int, default=0, help="CPU burners beside the suite (default 0: quiet)"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=SETTLE_SECONDS,
        help=f"seconds the burners spin before the suite starts (default {SETTLE_SECONDS:g})",
    )
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    if not 0 <= args.burners <= 256:
        parser.error("--burners is from 0 to 256")
    if not 0 <= args.settle <= 600:
        parser.error("--settle is from 0 to 600 seconds")
    entry = measure(args.pytest_args, log=args.log, burn=args.burners, settle=args.settle)
    print(json.dumps(entry, indent=2))
    if args.out:
        record(args.out, entry)
    if args.bench and kind_of(entry) == "quiet":
        receipts.write_receipt(
            args.bench, {**receipts.read_receipt(args.bench), "make_test": entry}
        )
    return 0 if entry["exit_status"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
