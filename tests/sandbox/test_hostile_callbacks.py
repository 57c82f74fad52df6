"""A hostile student against the objects the trusted side hands a sandbox (issue 47): the
worker may call back only what each kind offers (``lucyshop.lab.sandbox.callbacks``).

``hostile/handed_in.py``, appended to the reference with both of the kit's "holder check in
its own transaction" mutants applied, has ``reach(thing, names)``: it reads each name on an
object handed in and calls it if it is a method. Handed each kind of object the kit hands a
sandbox (the served shop, a supplier client and a test's stand-in for one, a stop event, a
function, a generator), it must be refused every public name beyond what that kind offers,
with nothing done on the trusted side. And in a real ``make check`` its ``observe`` and
``finish`` ask the served shop to loose the rival where they choose, as a file once did to
pass both mutants: the rows must be FAILING, each for the stale row.
"""

from __future__ import annotations

import threading

import pytest
from hostile_checks import (
    ISOLATED,
    hand_in,
    hostile,
    leftovers,
    run_check,
    short_tmpdir,
    split_writers,
)

from lucyshop.lab.check.subjects import FUNCTIONS
from lucyshop.lab.sandbox import Sandbox, callbacks
from lucyshop.lab.sandbox.served import ServedShop
from lucyshop.supplier import SupplierClient

pytestmark = ISOLATED

DUNDERS = ("__class__", "__dict__", "__reduce__", "__init__", "__globals__", "__self__")


class Wrapping:
    """A test's stand-in for a supplier client, holding the real one (as ``LookupOnly`` and
    ``Spy`` in the learner tests do)."""

    def __init__(self, client: SupplierClient) -> None:
        self.client, self.identity, self.timeout = client, client.identity, client.timeout
        self.lookups: list[str] = []

    def lookup(self, operation: str) -> None:
        self.lookups.append(operation)

    def order(self, operation: str, proposal: dict) -> None:
        raise AssertionError("never sent")


@pytest.fixture
def handed(tmp_path):
    """The hostile file loaded in a sandbox, and one object of each kind to hand it."""
    chapter = hand_in(tmp_path / "hand-in", split_writers() + hostile("handed_in"))
    (tmp_path / "scratch").mkdir()
    (tmp_path / "served.db").touch()
    asked: list[tuple[int, str]] = []
    server = ServedShop(tmp_path / "served.db", lambda number, sql: asked.append((number, sql)))
    client = SupplierClient("http://127.0.0.1:9", identity="dairy", timeout=1.0)
    things = {
        "server": server,
        "client": client,
        "wrapping": Wrapping(client),
        "event": threading.Event(),
        "function": [].append,
        "generator": (number for number in range(3)),
    }
    with Sandbox(chapter, scratch=[tmp_path / "scratch"], workdir=tmp_path / "work") as box:
        yield box.load(seconds=60), things, asked
    server.close()


def test_every_name_a_kind_does_not_offer_is_refused(handed):
    impl, things, asked = handed
    for kind, thing in things.items():
        offered = callbacks.offered(thing)
        names = {name for name in dir(thing) if not name.startswith("_")} | set(DUNDERS)
        found = impl.reach(thing, sorted(names - offered))
        reached = {name: said for name, said in found.items() if "may not use" not in said}
        assert reached == {}, (kind, reached)
    assert asked == [], "the served shop's before() was called from the sandbox"
    assert not things["event"].is_set(), "the sandbox set the stop event"
    assert next(things["generator"]) == 0, "the sandbox advanced the generator"
    assert things["wrapping"].lookups == []


def test_what_a_kind_offers_is_answered_by_value(handed):
    impl, things, _asked = handed
    assert impl.reach(things["server"], ["execute"]) == {"execute": "REACHED"}
    assert impl.reach(things["event"], ["is_set", "wait"]) == dict.fromkeys(
        ["is_set", "wait"], "REACHED"
    )
    assert impl.reach(things["client"], ["identity", "timeout"]) == dict.fromkeys(
        ["identity", "timeout"], "REACHED"
    )


def test_an_object_of_a_kind_that_offers_nothing_is_never_handed_in(handed):
    impl, _things, _asked = handed
    with pytest.raises(TypeError, match="cannot be handed in"):
        impl.reach(object(), ["__class__"])


@pytest.mark.slow
def test_a_file_that_asks_the_served_shop_for_the_rival_still_fails_both_writers(tmp_path):
    with short_tmpdir() as tmpdir:
        path = hand_in(tmp_path / "student", split_writers() + hostile("handed_in"))
        checked = run_check(path, tmpdir, "--no-measured", "--test-timeout=30", "--no-checkpoint")
        left = leftovers(checked.marker, str(tmpdir))
    assert checked.status == 1, checked.output[-3000:]
    caught = {"observe", "finish"}
    expected = {name: "FAILING" if name in caught else "PASSING" for name in FUNCTIONS}
    assert checked.functions() == expected, checked.functions()
    for name in caught:
        messages = [failure["message"] for failure in checked.rows()[name]["failures"]]
        assert any("stale holder still wrote" in message for message in messages), messages
    assert left == [], left
