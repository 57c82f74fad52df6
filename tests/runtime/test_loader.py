"""lab: loading an implementation, the NotStarted error, and the reference blocker.

Audit hooks last for the life of a process, so every scenario with the blocker installed
runs in a child Python and the test reads what the child printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lucyshop import IMPL_ENV
from lucyshop.lab import NotStarted
from lucyshop.lab.loader import (
    IMPLEMENTATIONS,
    MODULE,
    ROOT,
    ImplementationError,
    chapter_of,
    impl_path,
    is_blocked,
    load_impl,
)

SOLUTIONS_FILE = ROOT / "solutions" / "ch13_leases.py"
LEARNER_FILE = ROOT / "learner" / "ch13_leases.py"


@pytest.fixture(autouse=True)
def keep_sys_modules():
    """load_impl registers ``ch13_leases``; leave sys.modules as the test found it."""
    previous = sys.modules.get(MODULE)
    yield
    if previous is None:
        sys.modules.pop(MODULE, None)
    else:
        sys.modules[MODULE] = previous


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


# ---------------------------------------------------------------- load_impl


def test_the_named_implementations_are_the_two_files_of_the_kit():
    assert IMPLEMENTATIONS == {"learner": LEARNER_FILE, "solutions": SOLUTIONS_FILE}
    assert SOLUTIONS_FILE.is_file() and LEARNER_FILE.is_file()


def test_load_impl_solutions_runs_the_reference_as_ch13_leases():
    module = load_impl("solutions")
    assert module.__name__ == MODULE
    assert Path(module.__file__) == SOLUTIONS_FILE
    assert sys.modules[MODULE] is module
    assert module.percentile([3.0, 1.0, 2.0], 50) == 2.0


def test_load_impl_learner_gives_stubs_that_say_not_started():
    module = load_impl("learner")
    assert Path(module.__file__) == LEARNER_FILE
    with pytest.raises(NotStarted, match=r"percentile\(\) is not started"):
        module.percentile([1.0], 50)


@pytest.mark.parametrize("as_text", [True, False])
def test_load_impl_takes_the_path_of_any_python_file(tmp_path, as_text):
    path = write(tmp_path / "mine.py", "ANSWER = 42\n")
    module = load_impl(str(path) if as_text else path)
    assert (module.__name__, module.ANSWER) == (MODULE, 42)
    assert Path(module.__file__) == path.resolve()


def test_load_impl_defaults_to_the_environment_then_to_the_learner(tmp_path, monkeypatch):
    path = write(tmp_path / "chosen.py", "CHOSEN = True\n")
    monkeypatch.setenv(IMPL_ENV, str(path))
    assert load_impl().CHOSEN is True
    monkeypatch.delenv(IMPL_ENV)
    assert Path(load_impl().__file__) == LEARNER_FILE


def test_a_folder_or_its_exercises_file_names_the_chapter_file_in_it(tmp_path):
    """How a hand-in is named to the suites: its folder, or its answers (which a notebook
    still loads as they are, by their own path)."""
    chapter = write(tmp_path / "ch13_leases.py", "ANSWER = 42\n")
    answers = write(tmp_path / "exercises.py", "")
    assert chapter_of(tmp_path) == chapter_of(answers) == impl_path(tmp_path) == chapter.resolve()
    assert impl_path(answers) == answers.resolve()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImplementationError, match="no implementation at"):
        chapter_of(tmp_path / "empty")  # a folder without a chapter file
    chapter.unlink()
    with pytest.raises(ImplementationError, match="no ch13_leases.py beside"):
        chapter_of(answers)


def test_each_load_is_a_fresh_module_registered_under_the_same_name(tmp_path):
    path = write(tmp_path / "mine.py", "seen = []\n")
    first = load_impl(path)
    first.seen.append("first run")
    second = load_impl(path)
    assert second is not first
    assert second.seen == []
    assert sys.modules[MODULE] is second


def test_a_loaded_dataclass_survives_a_pickle_round_trip():
    import pickle

    module = load_impl("solutions")
    claim = module.Claim(1, "s", "text", "owner", 2, 100.0)
    assert pickle.loads(pickle.dumps(claim)) == claim
    assert claim.worker_id == "owner#2"


@pytest.mark.parametrize("spec", ["teacher", "nowhere/ch13_leases.py"])
def test_an_unknown_name_or_missing_path_is_an_implementation_error(spec):
    with pytest.raises(ImplementationError) as raised:
        load_impl(spec)
    message = str(raised.value)
    assert repr(spec) in message
    assert "'learner', 'solutions' or the path of a .py file" in message
    assert isinstance(raised.value, ValueError)


def test_a_directory_is_not_an_implementation(tmp_path):
    with pytest.raises(ImplementationError, match="no implementation at"):
        load_impl(tmp_path)


def test_a_file_that_is_not_python_is_an_implementation_error(tmp_path):
    path = write(tmp_path / "answers.txt", "ANSWER = 42\n")
    with pytest.raises(ImplementationError, match=r"\.py"):
        load_impl(path)
    assert MODULE not in sys.modules or Path(sys.modules[MODULE].__file__) != path


def test_a_syntax_error_names_the_file_and_line_and_keeps_the_previous_module(tmp_path):
    good = load_impl(write(tmp_path / "good.py", "GOOD = 1\n"))
    broken = write(tmp_path / "broken.py", "def claim(:\n    pass\n")
    with pytest.raises(ImplementationError) as raised:
        load_impl(broken)
    message = str(raised.value)
    assert str(broken) in message and "line 1" in message and "does not compile" in message
    assert sys.modules[MODULE] is good


def test_an_error_while_running_the_file_propagates_and_unregisters_it(tmp_path):
    sys.modules.pop(MODULE, None)
    path = write(tmp_path / "fails.py", "raise RuntimeError('my bug at import')\n")
    with pytest.raises(RuntimeError, match="my bug at import"):
        load_impl(path)
    assert MODULE not in sys.modules


def test_this_test_process_is_not_blocked():
    assert not is_blocked()


# ---------------------------------------------------------------- NotStarted


def test_not_started_names_the_function_and_the_section_and_is_not_implemented():
    error = NotStarted("claim", "13b § Claim work in one transaction")
    assert isinstance(error, NotImplementedError)
    assert (error.function, error.section) == ("claim", "13b § Claim work in one transaction")
    message = str(error)
    assert message.startswith("claim() is not started")
    assert "13b § Claim work in one transaction" in message
    assert message.endswith("line in tests/runtime/test_loader.py")  # the file that raised it


def test_a_learner_stub_names_the_learner_file():
    with pytest.raises(NotStarted) as stub:
        load_impl("learner").claim(None, "owner")
    assert stub.value.where == "learner/ch13_leases.py"
    assert str(stub.value).endswith("line in learner/ch13_leases.py")


# ---------------------------------------------------------------- the reference blocker

# Each attempt reaches for the reference a different way; the probe prints what happened.
PROBE = textwrap.dedent(
    """
    import importlib, json, runpy, sys
    results = {}
    attempts = {
        "import solutions": lambda: importlib.import_module("solutions"),
        "from solutions import ch13_leases":
            lambda: exec("from solutions import ch13_leases", {}),
        "from solutions.ch13_leases import claim":
            lambda: exec("from solutions.ch13_leases import claim", {}),
        "runpy.run_path": lambda: runpy.run_path("solutions/ch13_leases.py"),
        "open": lambda: open("solutions/ch13_leases.py").close(),
    }
    for name, attempt in attempts.items():
        try:
            attempt()
            results[name] = "ok"
        except Exception as error:
            results[name] = f"{type(error).__name__}: {error}"
        for loaded in [m for m in sys.modules if m == "solutions" or m.startswith("solutions.")]:
            del sys.modules[loaded]
    print(json.dumps(results))
    """
)
ATTEMPTS = [
    "import solutions",
    "from solutions import ch13_leases",
    "from solutions.ch13_leases import claim",
    "runpy.run_path",
    "open",
]


def run_python(argv: list[str], *, impl: str | None = None) -> subprocess.CompletedProcess:
    """A child Python in the kit's root (where ``import solutions`` resolves), 30 s at most."""
    env = {k: v for k, v in os.environ.items() if k != IMPL_ENV}
    if impl is not None:
        env[IMPL_ENV] = impl
    return subprocess.run(
        [sys.executable, *argv],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def probe(setup: str, *, impl: str | None = None, after: str = "") -> dict[str, str]:
    child = run_python(["-c", textwrap.dedent(setup) + PROBE + textwrap.dedent(after)], impl=impl)
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout.splitlines()[-1])


def assert_all_blocked(results: dict[str, str], names=ATTEMPTS) -> None:
    for name in names:
        assert results[name].startswith("ReferenceBlocked: reference blocked"), (name, results)


def test_without_the_blocker_the_reference_is_in_reach():
    results = probe("")
    assert results == dict.fromkeys(ATTEMPTS, "ok")


def test_the_blocker_refuses_every_way_of_reaching_the_reference():
    results = probe("from lucyshop.lab.loader import block_reference; block_reference()\n")
    assert_all_blocked(results)


def test_the_blocker_refuses_loading_the_reference_by_path():
    child = run_python(
        [
            "-c",
            textwrap.dedent(
                """
        from lucyshop.lab.loader import block_reference, is_blocked, load_impl
        block_reference()
        assert is_blocked()
        try:
            load_impl("solutions")
        except ImportError as error:
            print("refused:", error)
        else:
            print("loaded")
        """
            ),
        ]
    )
    assert child.returncode == 0, child.stderr
    assert "refused: reference blocked" in child.stdout


def test_block_for_solutions_loads_that_file_but_nothing_else_under_solutions():
    setup = """
        from lucyshop.lab.loader import block_for, load_impl
        block_for("solutions")
        module = load_impl("solutions")
        print("loaded", module.percentile([1.0, 2.0, 3.0, 4.0], 50))
        try:
            open("solutions/ch13_leases_notes.txt")  # any other file under solutions/
        except ImportError as error:
            print("other file:", error)
    """
    child = run_python(["-c", textwrap.dedent(setup) + PROBE])
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    assert lines[0] == "loaded 2.0"
    assert lines[1].startswith("other file: reference blocked")  # blocked before the open is tried
    results = json.loads(lines[-1])
    assert_all_blocked(results, ATTEMPTS[:3])  # importing the package stays closed


def test_block_for_the_learner_keeps_the_reference_closed():
    child = run_python(
        [
            "-c",
            textwrap.dedent(
                """
        from lucyshop.lab.loader import block_for, load_impl
        block_for("learner")
        print("learner", load_impl("learner").__file__)
        try:
            load_impl("solutions")
        except ImportError as error:
            print("solutions:", error)
        """
            ),
        ]
    )
    assert child.returncode == 0, child.stderr
    learner, solutions = child.stdout.splitlines()
    assert learner == f"learner {LEARNER_FILE}"
    assert solutions.startswith("solutions: reference blocked")


def test_the_first_allow_list_stands_when_the_blocker_is_installed_again():
    child = run_python(
        [
            "-c",
            textwrap.dedent(
                """
        from lucyshop.lab.loader import block_reference, load_impl, IMPLEMENTATIONS
        block_reference()
        block_reference(allow=[IMPLEMENTATIONS["solutions"]])
        try:
            load_impl("solutions")
        except ImportError as error:
            print("still blocked:", error)
        """
            ),
        ]
    )
    assert child.returncode == 0, child.stderr
    assert "still blocked: reference blocked" in child.stdout


@pytest.mark.parametrize(
    "body",
    [
        "from solutions.ch13_leases import *\n",
        "exec(open({path!r}).read())\n",
    ],
)
def test_a_learner_file_that_reaches_for_the_reference_fails_to_load(tmp_path, body):
    mine = write(tmp_path / "ch13_leases.py", body.format(path=str(SOLUTIONS_FILE)))
    child = run_python(
        [
            "-c",
            textwrap.dedent(
                f"""
        import sys
        from lucyshop.lab.loader import block_for, load_impl
        block_for({str(mine)!r})
        try:
            load_impl({str(mine)!r})
        except ImportError as error:
            print("refused:", error)
        print("registered:", "ch13_leases" in sys.modules)
        """
            ),
        ]
    )
    assert child.returncode == 0, child.stderr
    refused, registered = child.stdout.splitlines()
    assert refused.startswith("refused: reference blocked")
    assert registered == "registered: False"


CHILD = textwrap.dedent(
    """
    from lucyshop.lab.loader import is_blocked, load_impl
    print("blocked", is_blocked())
    print("impl", load_impl().__file__)
    """
)


@pytest.mark.parametrize(
    "impl, allowed", [("learner", LEARNER_FILE), ("solutions", SOLUTIONS_FILE)]
)
def test_a_child_started_through_the_blocked_runner_cannot_reach_the_reference(
    tmp_path, impl, allowed
):
    script = write(tmp_path / "child.py", CHILD + PROBE)
    child = run_python(["-m", "lucyshop.lab.blocked", str(script)], impl=impl)
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    assert lines[:2] == ["blocked True", f"impl {allowed}"]
    results = json.loads(lines[-1])
    if impl == "learner":
        assert_all_blocked(results)
    else:  # the one allowed file may be read; the package still cannot be imported
        assert_all_blocked(results, ATTEMPTS[:3])


def test_the_blocked_runner_refuses_to_run_the_reference_as_a_module():
    child = run_python(["-m", "lucyshop.lab.blocked", "solutions.ch13_leases"], impl="learner")
    assert child.returncode != 0
    assert "reference blocked" in child.stderr


def test_the_blocked_runner_passes_arguments_on_to_its_target(tmp_path):
    script = write(tmp_path / "args.py", "import sys; print(sys.argv[1:])\n")
    child = run_python(["-m", "lucyshop.lab.blocked", str(script), "--lease", "2"], impl="learner")
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "['--lease', '2']"


def test_the_blocked_runner_without_a_target_prints_its_usage():
    child = run_python(["-m", "lucyshop.lab.blocked"])
    assert child.returncode != 0
    assert "usage: python -m lucyshop.lab.blocked" in child.stderr
