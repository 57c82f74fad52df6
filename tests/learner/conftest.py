"""The learner suite: every chapter-13 function, tested against whichever implementation is chosen.

    .venv/bin/python -m pytest tests/learner --impl learner          # your file (the default)
    .venv/bin/python -m pytest tests/learner --impl solutions        # the reference
    .venv/bin/python -m pytest tests/learner --impl path/to/file.py  # anyone's file

``--impl`` defaults to ``$LEASES_IMPL``, else ``learner``. ``--block-reference`` (what
``make check`` passes) makes the reference solutions unreadable in this process, so a student's
file is tested on its own. One test module per function (``test_claim.py`` tests ``claim``):
that is how the ``make check`` table groups the results.

Each test gets a freshly loaded module (``impl``) and, for Part B, a real shop file
(``shop``). A test whose function is still a stub fails with that function's own
``NotStarted`` first, before its fixtures reach for other functions (see ``_stub_first``).
"""

from __future__ import annotations

import ast
import inspect
import itertools
import os
import socket
import sqlite3
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

import pytest
from impls import IMPL_PATH

from lucyshop.approval import SpendingPolicy, approve, propose
from lucyshop.lab.loader import ENV, load_impl
from lucyshop.lab.stubs import is_stub_node

# The test modules import the helpers below as ``from learner_support import ...``. The name
# ``conftest`` is shared by every conftest.py and means whichever pytest loaded last, so
# ``from conftest import`` breaks as soon as a run also loads tests/runtime/conftest.py.
sys.modules["learner_support"] = sys.modules[__name__]

OPERATOR = "lucy"
VANILLA = {"sku": "vanilla-tub", "quantity": 6, "unit_cents": 450}  # 2700 cents
VANILLA_CENTS = 2700


# The function each test module is about, where the module name alone does not say it.
FUNCTION_OF_MODULE = {"test_worker_id": "Claim.worker_id"}


def pytest_report_header(config: pytest.Config) -> str:
    blocked = " (reference blocked)" if config.getoption("--block-reference") else ""
    return f"chapter 13 implementation: {config.stash[IMPL_PATH]}{blocked}"


# ---------------------------------------------------------------- the implementation


@pytest.fixture(scope="session")
def impl_file(pytestconfig: pytest.Config) -> Path:
    """The resolved path of the implementation under test."""
    return pytestconfig.stash[IMPL_PATH]


@pytest.fixture
def impl(impl_file: Path):
    """The implementation, loaded fresh for this test (module ``ch13_leases``)."""
    return load_impl(impl_file)


@pytest.fixture
def child_env(impl_file: Path) -> dict[str, str]:
    """The environment of a child process: it loads the same file, with the reference blocked."""
    return os.environ | {ENV: str(impl_file)}


def function_of(module_name: str) -> str:
    return FUNCTION_OF_MODULE.get(module_name, module_name.removeprefix("test_"))


def is_stub(function) -> bool:
    """True when the function's body is still only its docstring and ``raise NotStarted(...)``."""
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return False
    return is_stub_node(ast.parse(source).body[0])


@pytest.fixture(autouse=True)
def _stub_first(request: pytest.FixtureRequest) -> None:
    """While this module's function is a stub, fail with *its* NotStarted before the fixtures run.

    A test of ``claim`` needs a shop (``open_worker_shop``) before it can call ``claim``. Without
    this, an untouched file would report every Part B function as "needs open_worker_shop()
    first" instead of "not started". Only a body that is still exactly the stub is called
    (with placeholder arguments, which a stub ignores); anything a student wrote is left to
    the tests themselves.
    """
    if "shop" not in request.fixturenames:
        return
    impl = request.getfixturevalue("impl")
    name = function_of(request.module.__name__.rpartition(".")[2])
    if name == "Claim.worker_id":
        if is_stub(impl.Claim.worker_id.fget):
            _ = impl.Claim(1, "s", "t", "o", 1, 0.0).worker_id  # raises NotStarted
        return
    function = getattr(impl, name, None)
    if function is None or not is_stub(function):
        return
    args, kwargs = [], {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.default is not parameter.empty:
            continue
        if parameter.kind is parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = None
        else:
            args.append(None)
    function(*args, **kwargs)  # a stub raises NotStarted naming itself


# ---------------------------------------------------------------- a shop and its work


@pytest.fixture
def shop(impl, tmp_path: Path):
    """A real shop file at the chapter-13 schema, from the implementation's ``open_worker_shop``."""
    db, queue = impl.open_worker_shop(tmp_path / "shop.db")
    yield db, queue
    db.close()


@pytest.fixture
def db(shop) -> sqlite3.Connection:
    return shop[0]


@pytest.fixture
def add_work(shop):
    """``add_work(session="s1", text=None) -> work_id``: admit one assignment through the queue.

    Goes through chapter 8's ``WorkQueue.admit`` directly, so a test of ``claim`` does not
    depend on ``enqueue``.
    """
    _db, queue = shop
    numbers = itertools.count(1)

    def add(session: str = "s1", text: str | None = None) -> int:
        n = next(numbers)
        admission = queue.admit(f"source-{n}", session, text or f"turn {n} of {session}")
        assert admission.status == "accepted", admission
        return admission.work_id

    return add


@pytest.fixture
def policy() -> SpendingPolicy:
    return SpendingPolicy(operators={OPERATOR}, total_cents=50_000, automatic_order_cents=10_000)


def rows(db: sqlite3.Connection, table: str, order: str = "rowid") -> list[dict]:
    """Every row of ``table`` as dicts: what the tests read back."""
    return [dict(r) for r in db.execute(f"SELECT * FROM {table} ORDER BY {order}")]


def lease(db: sqlite3.Connection, work_id: int) -> dict | None:
    row = db.execute("SELECT * FROM assignment_leases WHERE work_id = ?", (work_id,)).fetchone()
    return None if row is None else dict(row)


def work(db: sqlite3.Connection, work_id: int) -> dict:
    return dict(db.execute("SELECT * FROM work WHERE work_id = ?", (work_id,)).fetchone())


def snapshot(db: sqlite3.Connection) -> dict[str, list[dict]]:
    """The tables a claim, a fence or a recovery may change."""
    return {
        table: rows(db, table)
        for table in (
            "work",
            "assignment_leases",
            "transcript",
            "outcomes",
            "assistant_orders",
            "spending_account",
        )
    }


def finish_by_sql(db: sqlite3.Connection, work_id: int) -> None:
    """Move work to finished with the supplied schema alone (no chapter-13 function)."""
    db.execute("UPDATE work SET state = 'finished' WHERE work_id = ?", (work_id,))


def approved_order(
    db: sqlite3.Connection, held, supplier: str, policy: SpendingPolicy, *, now=None
):
    """Propose six vanilla tubs for the held work and record the operator's approval."""
    order = propose(db, held, supplier=supplier, proposal=VANILLA, now=now)
    return approve(
        db, order["order_id"], actor=OPERATOR, digest=order["digest"], policy=policy, now=now
    )


class RivalBetween:
    """Take the work over on a second connection the moment ``db`` starts a new transaction
    after reading the lease: between a holder check and a write that are not one transaction.

    A ``set_trace_callback`` sees each statement as it starts. A check and write that share
    one transaction never give it that moment (``during`` stays False). Raw SQL, not the
    student's ``claim``: the test is about the writer.
    """

    def __init__(self, db: sqlite3.Connection, work_id: int, expires: float) -> None:
        self.db, self.work_id, self.expires = db, work_id, expires
        self.path = db.execute("PRAGMA database_list").fetchone()[2]
        self.read_lease = False
        self.during = False

    def __enter__(self) -> RivalBetween:
        self.db.set_trace_callback(self._statement)
        return self

    def __exit__(self, *exc: object) -> None:
        self.db.set_trace_callback(None)

    def _statement(self, sql: str) -> None:
        if self.during:
            return
        if "assignment_leases" in sql:
            self.read_lease = True
        elif self.read_lease and not self.db.in_transaction:
            self.during = True
            self.take_over()

    def take_over(self) -> None:
        rival = sqlite3.connect(self.path, isolation_level=None, timeout=5)
        try:
            rival.execute("BEGIN IMMEDIATE")
            generation = rival.execute(
                "SELECT generation FROM assignment_leases WHERE work_id = ?", (self.work_id,)
            ).fetchone()[0]
            holder = f"rival#{generation + 1}"
            rival.execute(
                "UPDATE assignment_leases SET worker_id = ?, generation = ?, expires = ?"
                " WHERE work_id = ?",
                (holder, generation + 1, self.expires, self.work_id),
            )
            rival.execute("UPDATE work SET worker_id = ? WHERE work_id = ?", (holder, self.work_id))
            rival.execute("COMMIT")
        finally:
            rival.close()


def dead_endpoint() -> str:
    """An endpoint nobody listens on: a port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@contextmanager
def refuses(kind: type[BaseException], what: str):
    """Expect ``kind`` from the block; on anything else that returns, fail saying ``what``.

    Other exceptions (a ``NotStarted`` included) propagate unchanged.
    """
    try:
        yield
    except kind:
        return
    pytest.fail(f"{what} should raise {kind.__name__}", pytrace=False)
