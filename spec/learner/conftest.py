"""The learner suite: every chapter-13 function, tested against whichever implementation is chosen.

    .venv/bin/python -m pytest spec/learner --impl learner          # your file (the default)
    .venv/bin/python -m pytest spec/learner --impl solutions        # the reference
    .venv/bin/python -m pytest spec/learner --impl path/to/file.py  # anyone's file

``--impl`` defaults to ``$LEASES_IMPL``, else ``learner``. The file runs in a sandboxed
worker (``impl``), whose view of the kit has no ``solutions/`` where the machine can isolate
it. ``--block-reference`` also makes the reference unreadable in this pytest process itself
(the mutant runs of tests/check pass it); ``make check`` does not pass it: its children never
import the student's file, and the sandbox keeps the reference out of the file's reach. One
test module per function (``test_claim.py`` tests ``claim``), and one per row beyond the
book (``test_claim_beyond_the_book.py``): that is how the ``make check`` table groups the
results.

Every call is the chapter's: its functions' own arguments, never a keyword or a type the book
does not pass. Time is controlled only through the ``now`` that ``claim`` and
``assert_current`` take and through real leases: ``held`` is claimed at the real clock, so
it stays current for its 30 s; a holder claimed a minute in the past has already expired.

Each test gets a freshly loaded module (``impl``) and, for Part B, a real shop file
(``worker_shop``). A test whose function is still a stub fails with that function's own
``NotStarted`` first, before its fixtures reach for other functions (see ``_stub_first``).
"""

from __future__ import annotations

import itertools
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from learner_support import work_id_of

from lucyshop import IMPL_ENV
from lucyshop.approval import SpendingPolicy
from lucyshop.lab.check.plugin.chapter import IMPL_PATH, budget, sandbox_for
from lucyshop.lab.checkpoint.rival import WRITERS, RivalAtEveryMoment
from lucyshop.lab.given.orders import OPERATOR
from lucyshop.lab.given.stubs import placeholders, stub_nodes
from lucyshop.lab.sandbox import Mirror, Sandbox, sandboxed_shop
from lucyshop.lab.sandbox.jail import remove_tree

# The function each test module is about, where the module name alone does not say it.
FUNCTION_OF_MODULE = {
    "test_worker_id": "Claim.worker_id",
    "test_claim_beyond_the_book": "claim",
}


def pytest_report_header(config: pytest.Config) -> str:
    blocked = " (reference blocked)" if config.getoption("--block-reference") else ""
    return f"chapter 13 implementation: {config.stash[IMPL_PATH]}{blocked}"


# ---------------------------------------------------------------- the implementation


@pytest.fixture
def impl(request: pytest.FixtureRequest):
    """The implementation, loaded fresh in the sandbox for this test (module ``ch13_leases``):
    calling its functions runs them there, with this test's deadline."""
    return sandbox_for(request).load(seconds=budget(request))


@pytest.fixture
def sandboxed(sandbox: Sandbox):
    """``sandboxed(argv) -> (argv, env)``: a ``python ...`` command that runs in a sandbox of
    its own, loading the same file (for tests that need several processes)."""

    def wrap(argv: list[str]) -> tuple[list[str], dict[str, str]]:
        inside = sandbox.jail.inside(sandbox.jail.staged / "ch13_leases.py")
        return sandbox.jail.argv(argv), sandbox.jail.env({IMPL_ENV: str(inside)})

    return wrap


def function_of(module_name: str) -> str:
    return FUNCTION_OF_MODULE.get(module_name, module_name.removeprefix("test_"))


@pytest.fixture(autouse=True)
def _stub_first(request: pytest.FixtureRequest, chapter_file: Path) -> None:
    """While this module's function is a stub, fail with *its* NotStarted before the fixtures run.

    A test of ``claim`` needs a shop (``open_worker_shop``) before it can call ``claim``. Without
    this, an untouched file would mark every Part B function as "needs open_worker_shop()
    first" instead of "not started". Whether the body is still exactly the stub is read from
    the file's syntax tree; only then is it called (with placeholder arguments, which a stub
    ignores), in the sandbox, to raise its own NotStarted.
    """
    if "worker_shop" not in request.fixturenames:
        return
    name = function_of(request.module.__name__.rpartition(".")[2])
    node = stub_nodes(chapter_file).get(name)
    if node is None:
        return
    impl = request.getfixturevalue("impl")
    if name == "Claim.worker_id":
        _ = impl.Claim(1, "s", "t", "o", 1, 0.0).worker_id  # raises NotStarted
        return
    args, kwargs = placeholders(node)
    getattr(impl, name)(*args, **kwargs)  # a stub raises NotStarted naming itself


# ---------------------------------------------------------------- a shop and its work


@pytest.fixture
def worker_shop(impl, tmp_path: Path):
    """A real shop file at the chapter-13 schema, from the implementation's ``open_worker_shop``."""
    db, queue = sandboxed_shop(impl, tmp_path / "shop.db")
    yield db, queue
    db.close()


@pytest.fixture
def db(worker_shop) -> sqlite3.Connection:
    return worker_shop[0]


@pytest.fixture
def add_work(worker_shop):
    """``add_work(session="s1", text=None) -> work_id``: admit one assignment through the queue.

    Goes through chapter 8's ``WorkQueue.admit`` directly, so a test of ``claim`` does not
    depend on ``enqueue``; the work id is read back from the file by its source id.
    """
    db, queue = worker_shop
    numbers = itertools.count(1)

    def add(session: str = "s1", text: str | None = None) -> int:
        n = next(numbers)
        answer = queue.admit(f"source-{n}", session, text or f"turn {n} of {session}")
        assert answer == "accepted", answer
        return work_id_of(db, f"source-{n}")

    return add


@pytest.fixture
def claim_as(impl, db):
    """``claim_as(owner, ttl)``: the chapter's ``claim`` on this test's shop at the real clock
    (what the shared ``held`` fixture claims with): its holder is current for ``ttl`` s."""
    return lambda owner, ttl: impl.claim(db, owner, ttl=ttl)


@pytest.fixture
def policy() -> SpendingPolicy:
    return SpendingPolicy(operators={OPERATOR}, total_cents=50_000, automatic_order_cents=10_000)


@pytest.fixture
def rival_at_every_moment(impl, db: Mirror, held: Any) -> Iterator[Callable[[str], Any]]:
    """``rival_at_every_moment(what)``: a rival who takes ``held``'s work over before any
    statement the trusted side picks of ``what`` (``observe`` or ``finish``), on copies of
    the shop in a directory of this side's own, out of the sandbox's view, removed after
    (``lucyshop.lab.checkpoint.rival``). ``.attempt(call, what)`` fails the test at the first
    stale write, or when the rival never got in."""
    home = Path(tempfile.mkdtemp(prefix="ch13-served-"))
    probes = impl._sandbox.kit("lucyshop.lab.sandbox.inside.shop_probes")
    try:
        yield lambda what: RivalAtEveryMoment(probes, db, held, WRITERS[what], home)
    finally:
        remove_tree(home)
