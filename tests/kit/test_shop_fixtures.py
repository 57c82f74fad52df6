"""Each shared shop fixture is stated once in tests/: in ``shop_fixtures.py``, nowhere else;
and the shop itself once in the whole kit, in ``lucyshop.lab.given.orders``: the order
(``VANILLA``), the workers' service name (``OWNER``), the operator (``OPERATOR``) and the
spending policy (``POLICY``), by name or written out.

The order every suite proposes (``VANILLA``, and the same dict written out), the tables a
test reads back (``CHANGED_TABLES``, or the same list written out), the ``supplier``,
``shared_supplier``, ``garbage_supplier`` (its ``GarbageHandler``) and ``held`` fixtures; and
in the whole kit once, in ``lucyshop.lab.given.exercise_kit``, the free-port probe (a socket
bound to port 0 and closed, not listened on) and ``dead_endpoint``. A second copy drifts from
the first (a different rejected SKU, a different claim), so a test file that needs one imports
it or asks for the fixture.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from shop_fixtures import CHANGED_TABLES, VANILLA

from lucyshop.lab.given.orders import OPERATOR, OWNER, POLICY

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
HOME = TESTS / "shop_fixtures.py"
GIVEN = ROOT / "src" / "lucyshop" / "lab" / "given"
ORDERS, EXERCISE_KIT = GIVEN / "orders.py", GIVEN / "exercise_kit.py"
KIT = sorted(
    p
    for folder in ("src", "solutions", "learner", "checkpoints")
    for p in (ROOT / folder).rglob("*.py")
    if p not in (ORDERS, EXERCISE_KIT)
)
DATA = {"VANILLA", "VANILLA_CENTS", "REJECTED_SKU", "OWNER", "OPERATOR", "POLICY", "CHANGED_TABLES"}
DEFINED = {
    "free_port",
    "_free_port",
    "dead_endpoint",
    "running_supplier",
    "supplier",
    "shared_supplier",
    "garbage",
    "garbage_endpoint",
    "garbage_supplier",
    "GarbageHandler",
    "held",
}


def restatements(source: str) -> list[str]:
    """Where ``source`` states one of the shared fixtures again, one line each, in order."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [
                (node.lineno, f"{t.id} = ...")
                for t in targets
                if isinstance(t, ast.Name) and t.id in DATA
            ]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name in DEFINED:
                found.append((node.lineno, f"def {node.name}"))
            found += [(line, f"a free-port probe in {node.name}()") for line in probes(node)]
        elif isinstance(node, ast.ClassDef) and node.name in DEFINED:
            found.append((node.lineno, f"class {node.name}"))
        elif isinstance(node, ast.Tuple | ast.List) and literal(node) in (
            CHANGED_TABLES,
            list(CHANGED_TABLES),
        ):
            found.append((node.lineno, "the CHANGED_TABLES list written out"))
        elif isinstance(node, ast.Dict) and literal(node) == VANILLA:
            found.append((node.lineno, "the VANILLA order written out"))
        elif isinstance(node, ast.Constant) and node.value == OWNER:
            found.append((node.lineno, "the OWNER name written out"))
        elif isinstance(node, ast.Call) and is_the_shops_policy(node):
            found.append((node.lineno, "the shop's POLICY written out"))
    found += [
        (node.lineno, "the OPERATOR name written out")
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and isinstance(node.value, ast.Constant)
        and node.value.value == OPERATOR
    ]
    return [f"line {line}: {what}" for line, what in sorted(found)]


def probes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    """Lines where ``function`` binds a socket to port 0 without listening on it: a port
    taken only to learn a free number (a listening server is something else)."""
    calls = [n for n in ast.walk(function) if isinstance(n, ast.Call)]
    methods = {c.func.attr for c in calls if isinstance(c.func, ast.Attribute)}
    if "listen" in methods:
        return []
    return [
        c.lineno
        for c in calls
        if isinstance(c.func, ast.Attribute)
        and c.func.attr == "bind"
        and c.args
        and isinstance(c.args[0], ast.Tuple)
        and len(c.args[0].elts) == 2
        and isinstance(c.args[0].elts[1], ast.Constant)
        and c.args[0].elts[1].value == 0
    ]


def is_the_shops_policy(call: ast.Call) -> bool:
    """A ``SpendingPolicy(...)`` with the shop's two ceilings, whoever its operators are."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name != "SpendingPolicy":
        return False
    amounts = dict(zip(("total_cents", "automatic_order_cents"), call.args[1:], strict=False))
    amounts |= {k.arg: k.value for k in call.keywords if k.arg}
    return [literal(amounts.get(k)) for k in ("total_cents", "automatic_order_cents")] == [
        POLICY.total_cents,
        POLICY.automatic_order_cents,
    ]


def literal(node: ast.expr | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


@pytest.mark.parametrize(
    "path",
    sorted(p for p in TESTS.rglob("*.py") if p != HOME),
    ids=lambda p: p.relative_to(TESTS).as_posix(),
)
def test_no_shared_fixture_is_stated_again(path: Path) -> None:
    assert restatements(path.read_text(encoding="utf-8")) == [], (
        f"{path.relative_to(TESTS)} states a shared fixture again: import it from"
        " shop_fixtures (or ask for the fixture) instead"
    )


@pytest.mark.parametrize("path", KIT, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_shop_is_written_out_nowhere_else_in_the_kit(path: Path) -> None:
    """The checkpoint, the experiment, the exercises and the reference import the one shop
    (``given.orders``) and the one dead address (``given.exercise_kit``)."""
    found = [
        line
        for line in restatements(path.read_text(encoding="utf-8"))
        if "REJECTED_SKU" not in line  # the tests' own; the soak's supplier rejects another
    ]
    assert found == [], f"{path.relative_to(ROOT)}: import it from lucyshop.lab.given"


def test_the_shop_lives_in_the_labs_given_orders() -> None:
    found = {line.split(": ", 1)[1] for line in restatements(ORDERS.read_text(encoding="utf-8"))}
    assert found >= {
        "VANILLA = ...",
        "the VANILLA order written out",
        "OWNER = ...",
        "the OWNER name written out",
        "OPERATOR = ...",
        "the OPERATOR name written out",
        "POLICY = ...",
        "the shop's POLICY written out",
    }


def test_the_fixtures_live_in_shop_fixtures() -> None:
    found = {line.split(": ", 1)[1] for line in restatements(HOME.read_text(encoding="utf-8"))}
    assert not {line for line in found if "free_port" in line or "dead_endpoint" in line}, (
        "the dead address is the lab's: import it from lucyshop.lab.given.exercise_kit"
    )
    assert found >= {
        "def supplier",
        "def garbage_supplier",
        "class GarbageHandler",
        "def held",
        "CHANGED_TABLES = ...",
        "the CHANGED_TABLES list written out",
    }


def test_the_dead_address_lives_in_the_given_exercise_kit() -> None:
    found = restatements(EXERCISE_KIT.read_text(encoding="utf-8"))
    assert {line.split(": ", 1)[1] for line in found} == {
        "def free_port",
        "def dead_endpoint",
        "a free-port probe in free_port()",
    }


def test_the_check_finds_each_kind_of_copy() -> None:
    """Planted copies, one of each kind, are all found; a listening server is not one."""
    planted = """
VANILLA = {"sku": "vanilla-tub", "quantity": 6, "unit_cents": 450}

def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]

def test_dead(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    order(port, {"quantity": 6, "unit_cents": 450, "sku": "vanilla-tub"})

@pytest.fixture
def held(impl, db, add_work):
    add_work()
    return impl.claim(db, "till", ttl=30)

@pytest.fixture
def supplier(tmp_path):
    with supplier_process(tmp_path) as running:
        yield running

def server():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)

SERVICE = "lucy-worker"
ME: str = "lucy"
STRICT = approval.SpendingPolicy({ME}, 10_000, automatic_order_cents=5_000)
ROOMY = SpendingPolicy({"lucy"}, total_cents=50_000, automatic_order_cents=10_000)
registry = {"lucy-worker": 4242}

class GarbageHandler(BaseHTTPRequestHandler):
    pass

TABLES = ["work", "assignment_leases", "transcript", "outcomes", "assistant_orders",
          "spending_account"]
"""
    assert restatements(planted) == [
        "line 2: VANILLA = ...",
        "line 2: the VANILLA order written out",
        "line 4: def _free_port",
        "line 6: a free-port probe in _free_port()",
        "line 11: a free-port probe in test_dead()",
        "line 13: the VANILLA order written out",
        "line 16: def held",
        "line 21: def supplier",
        "line 30: the OWNER name written out",
        "line 31: the OPERATOR name written out",
        "line 32: the shop's POLICY written out",
        "line 34: the OWNER name written out",
        "line 36: class GarbageHandler",
        "line 39: the CHANGED_TABLES list written out",
    ]
