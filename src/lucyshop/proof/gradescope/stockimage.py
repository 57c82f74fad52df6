"""Prove the Gradescope zip on a bare image: Debian with no Python, setup.sh, one graded run.

    python -m lucyshop.proof.gradescope.stockimage [--zip build/autograder.zip] [--fresh]
    [--keep]
    make autograder-proof

Gradescope builds its image by running the zip's ``setup.sh`` on Ubuntu 22.04, then runs
``run_autograder`` once per submission under a timeout (600 s by default) and a memory limit
(768 MB). This module does the same where it can be checked without Gradescope:

1. a minimal Debian root filesystem (``debootstrap --variant=minbase``, from the mirror the
   machine's apt already uses), kept as a tarball under ``build/stockimage/`` so reruns skip
   the download; it has no Python, so ``setup.sh`` must install everything itself;
2. the zip unpacked as ``/autograder/source`` and ``setup.sh`` run in it as root, with the
   image as the whole filesystem (``pivot_root``, as a container has it) of a PID and mount
   namespace of its own: nothing mounted or running outlives it;
3. the reference's three files handed in as ``/autograder/submission``, and ``run_autograder`` run
   under half a core and 768 MiB (a cgroup), timed, its peak memory taken from the cgroup and
   from the process tree's resident sizes (``--isolation user`` forces the sandbox's mode for
   a container without user namespaces);
4. ``results.json`` validated against ``grading/results.schema.json`` and its score checked to
   be the rubric's total; the figures written to ``proof/receipts/gradescope-run.json``.

Reruns reuse the downloaded packages and built wheels (``build/stockimage/cache``); ``--fresh``
starts from nothing. Linux only, as root, with ``debootstrap`` and util-linux's ``unshare``.

The steps live by what they touch: ``image`` (the Debian tarball and its unpacking),
``inside`` (running a command in the image's namespaces), ``quota`` (the cgroup limits);
this module is the proof that runs them in order, checks ``results.json`` and writes the
evidence.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lucyshop.lab.evidence import receipts
from lucyshop.lab.grade import rubric
from lucyshop.lab.grade.gradescope import autograder
from lucyshop.lab.loader import ROOT
from lucyshop.lab.statuses import Mark
from lucyshop.proof.gradescope import image, inside, quota
from lucyshop.proof.gradescope.image import (
    SUITE,
    ProofError,
    debian_mirror,
    pristine,
    pythons_in,
    remove_tree,
    trust_local_cas,
    unpack,
)
from lucyshop.proof.gradescope.inside import ENTER, Ran, in_image
from lucyshop.proof.gradescope.quota import Quota

BUILD = ROOT / "build" / "stockimage"
EVIDENCE = ROOT / "proof" / "receipts" / "gradescope-run.json"
TEMPLATES = (autograder.TEMPLATES / "setup.sh", autograder.TEMPLATES / "run_autograder")
RESULTS_SCHEMA = ROOT / "grading" / "results.schema.json"
SUBMISSION = tuple(
    ROOT / "solutions" / name for name in ("ch13_leases.py", "exercises.py", "ch13_postgres.py")
)
IMAGE_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
GRADESCOPE_MEMORY = 768 * 2**20  # bytes: Gradescope's default, a Docker limit of 768m
SETUP_SECONDS = 2400.0  # apt and pip, from cold
SCHEMA = "gradescope-run/2"  # 2: its pass conditions are "conditions"
MODE_ENV = "LUCYSHOP_ISOLATION"  # lucyshop.lab.sandbox.jail's override of its own choice
# The proof's own code, by sha256 in its evidence: this module and the steps it runs.
CODE = (
    Path(autograder.__file__),
    Path(__file__),
    *(Path(step.__file__) for step in (image, inside, quota)),
    ENTER,
    *TEMPLATES,
)


# ---------------------------------------------------------------- the proof


def check_results(path: Path, total: float) -> dict[str, Any]:
    """What ``results.json`` says, whether it follows Gradescope's schema, and whether its
    score is the rubric's ``total``."""
    from jsonschema import Draft202012Validator

    if not path.is_file():
        return {"present": False, "valid": False, "full_score": False, "problems": ["missing"]}
    document = json.loads(path.read_text(encoding="utf-8"))
    schema = json.loads(RESULTS_SCHEMA.read_text(encoding="utf-8"))
    problems = [e.message for e in Draft202012Validator(schema).iter_errors(document)]
    score = document.get("score")
    tests = document.get("tests", [])
    return {
        "present": True,
        "valid": not problems,
        "problems": problems[:10],
        "score": score,
        "max_score": total,
        "full_score": isinstance(score, int | float) and abs(score - total) < 0.005,
        "execution_time": document.get("execution_time"),
        "tests": len(tests),
        "failed_tests": [t.get("name") for t in tests if t.get("status") == "failed"],
    }


def kit_commit() -> dict[str, Any]:
    """The kit's commit (``make autograder-proof`` builds the zip from the same tree) and the
    files changed beyond it."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *args], check=False, capture_output=True, text=True, timeout=30
        )
        return done.stdout if done.returncode == 0 else ""

    # Porcelain lines are "XY path": the status's first column may be a space, kept.
    changed = [line[3:] for line in git("status", "--porcelain").splitlines() if line]
    return {"commit": git("rev-parse", "HEAD").strip() or None, "changed_files": changed}


def isolation(root: Path, log: Path, forced: str | None = None) -> str:
    """How the kit set up in the image isolates student code there (the sandbox's own choice,
    or ``forced``: bubblewrap, an unprivileged user, or none), or why that could not be asked."""
    python = "/autograder/source/kit/.venv/bin/python"
    ask = "from lucyshop.lab.sandbox.jail import describe; print(describe())"
    env = [f"{MODE_ENV}={forced}"] if forced else []
    ran = in_image(root, [*env, python, "-c", ask], timeout=60, log=log)
    lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    answer = lines[-1] if lines else "no answer"
    return answer if ran.exit_status == 0 else f"cannot tell ({ran.exit_status}): {answer}"


@dataclass
class Found:
    """What one proof saw, step by step (``evidence`` writes it down)."""

    mirror: str
    caches_reused: dict[str, bool]
    local_cas: list[str]
    pythons_before: list[str]
    extras: str
    timeout: float  # the zip's, Gradescope's autograder timeout: the run's wall limit
    setup: Ran
    pythons_after: list[str]
    isolation: str
    quota: Quota
    run: Ran | None  # None: setup.sh failed, so nothing was graded
    kernel: dict[str, Any]
    results: dict[str, Any]


def prove(args: argparse.Namespace) -> tuple[dict[str, Any], Found]:
    """Everything the module docstring lists: (provenance, what was found)."""
    if os.geteuid() != 0:
        raise ProofError("run as root: debootstrap, the namespaces and the cgroup need it")
    for tool in ("debootstrap", "unshare", "pivot_root", "tar"):
        if shutil.which(tool) is None:
            raise ProofError(f"{tool} is not installed (apt-get install debootstrap util-linux)")
    if not args.zip.is_file():
        raise ProofError(f"no {args.zip}: run make autograder first")
    cache, root = args.build / "cache", args.build / "root"
    if args.fresh:
        remove_tree(cache)
    record = receipts.provenance(
        command=["-m", "lucyshop.proof.gradescope.stockimage", *args.argv],
        code=list(CODE),
    )
    reused = {"pip": any((cache / "pip").glob("*")), "apt": any((cache / "apt").glob("*.deb"))}
    mirror = args.mirror or debian_mirror()
    tarball = pristine(args.build, mirror, fresh=args.fresh)
    before = pythons_in(tarball)
    unpack(tarball, root, args.zip, SUBMISSION)
    cas = trust_local_cas(root)
    binds = [(cache / "pip", "/root/.cache/pip"), (cache / "apt", "/var/cache/apt/archives")]
    extras = autograder.installed_extras(args.zip)
    timeout = autograder.built_timeout(args.zip)  # what Gradescope's timeout is to be set to
    print(f"stockimage: setup.sh (extras [{extras}]) in {root}", flush=True)
    setup = in_image(
        root,
        [*([f"PIP_CERT={IMAGE_BUNDLE}"] if cas else []), "bash", "/autograder/source/setup.sh"],
        timeout=args.setup_timeout,
        log=args.build / "setup.log",
        binds=binds,
    )
    after = sorted(p.name for p in (root / "usr" / "bin").glob("python3*"))
    sandbox = ""
    if setup.exit_status == 0:
        sandbox = isolation(root, args.build / "isolation.log", args.isolation)
    quota = Quota.make(args.cpu, args.memory, f"lucyshop-autograder-{os.getpid()}")
    run, kernel = None, {}
    try:
        if setup.exit_status == 0:
            print(f"stockimage: run_autograder, confined by {quota.mechanism}", flush=True)
            forced = [f"{MODE_ENV}={args.isolation}"] if args.isolation else []
            run = in_image(
                root,
                ["PYTHONUNBUFFERED=1", *forced, "/autograder/run_autograder"],
                timeout=timeout,
                log=args.build / "run.log",
                quota=quota,
            )
            kernel = quota.figures()
    finally:
        quota.remove()
    total = rubric.load(root / "autograder" / "source" / "kit" / "grading" / "rubric.toml").total
    results = check_results(root / "autograder" / "results" / "results.json", total)
    if not args.keep:
        remove_tree(root)
    found = Found(
        mirror,
        reused,
        cas,
        before,
        extras,
        timeout,
        setup,
        after,
        sandbox,
        quota,
        run,
        kernel,
        results,
    )
    return record, found


def evidence(args: argparse.Namespace, record: dict[str, Any], found: Found) -> dict[str, Any]:
    """The evidence document: the pass conditions, the figures, the kit's commit, the provenance."""
    setup, run, kernel = found.setup, found.run, found.kernel
    peak = kernel.get("peak_bytes") or (run.peak_tree_rss_bytes if run else None)
    conditions = {
        "setup_succeeded": setup.exit_status == 0,
        "finished_in_time": run is not None
        and run.exit_status == 0
        and run.seconds <= found.timeout,
        "memory_within_limit": peak is not None  # a cgroup's peak stops at its limit: below it
        and peak < args.memory
        and not kernel.get("oom_kills"),
        "quota_applied": found.quota.mechanism != "none",
        "results_valid": found.results["valid"],
        "full_score": found.results["full_score"],
    }
    return {
        "schema": SCHEMA,
        "passed": all(conditions.values()),
        "conditions": conditions,
        "image": {
            "suite": SUITE,
            "variant": "minbase",
            "mirror": found.mirror,
            "pythons_before_setup": found.pythons_before,
            "pythons_after_setup": found.pythons_after,
            "isolation": found.isolation,
            "caches_reused": found.caches_reused,
            "local_cas_copied_in": found.local_cas,
        },
        "setup": {
            "extras": found.extras,
            "exit_status": setup.exit_status,
            "seconds": round(setup.seconds, 1),
            "timeout_seconds": args.setup_timeout,
        },
        "run": None
        if run is None
        else {
            "exit_status": run.exit_status,
            "seconds": round(run.seconds, 1),
            "peak_cgroup_bytes": kernel.get("peak_bytes"),
            "peak_tree_rss_bytes": run.peak_tree_rss_bytes,
            "peak_processes": run.peak_processes,
            "cpu_seconds": _rounded(kernel.get("cpu_seconds")),
            "throttled_periods": kernel.get("throttled_periods"),
            "limit_hits": kernel.get("limit_hits"),
            "oom_kills": kernel.get("oom_kills"),
            "quota": found.quota.describe(),
            "isolation_forced": args.isolation,
        },
        "limits": {
            "wall_seconds": found.timeout,
            "memory_bytes": args.memory,
            "cpu_cores": args.cpu,
        },
        "results": found.results,
        "kit": kit_commit(),
        "provenance": receipts.finish(record),
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.proof.gradescope.stockimage",
        description=__doc__.split("\n")[0],
    )
    parser.add_argument("--zip", type=Path, default=autograder.DEFAULT_ZIP)
    parser.add_argument("--build", type=Path, default=BUILD, help="tarball, caches and logs")
    parser.add_argument("--evidence", type=Path, default=EVIDENCE)
    parser.add_argument("--mirror", help="a Debian mirror (default: apt's own, for bookworm)")
    parser.add_argument("--fresh", action="store_true", help="no tarball or caches kept")
    parser.add_argument("--keep", action="store_true", help="keep the root filesystem after")
    parser.add_argument("--setup-timeout", type=float, default=SETUP_SECONDS)
    parser.add_argument(
        "--isolation",
        choices=("bwrap", "user", "none"),
        help="force the sandbox's mode in run_autograder (default: the kit chooses, as on"
        " Gradescope; user is what a container without user namespaces gets)",
    )
    parser.add_argument("--cpu", type=float, default=0.5, help="cores (a CPU quota)")
    parser.add_argument("--memory", type=int, default=GRADESCOPE_MEMORY, help="bytes")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        record, found = prove(args)
    except ProofError as error:
        print(f"stockimage: {error}", file=sys.stderr)
        return 2
    document = evidence(args, record, found)
    receipts.write_receipt(args.evidence, document)
    print(json.dumps({k: document[k] for k in ("conditions", "run", "results")}, indent=1))
    outcome = Mark.PASS if document["passed"] else Mark.FAIL
    print(f"stockimage: {outcome}; evidence in {receipts.shown(args.evidence)}")
    return 0 if document["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
