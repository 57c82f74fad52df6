"""The checkpoints' holder children stop the same way before they hold any work: a stub exits
3 and names itself in ``ready.json``, a reach for the reference exits 4 and says so. Run here in
this process on the stubs, with no supplier and no server behind them (they stop first)."""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path

from lucyshop import IMPL_ENV
from lucyshop.lab.given import pg_shop
from lucyshop.lab.loader import _ImportBlocker
from lucyshop.lab.sandbox.inside import holder, pg_holder
from lucyshop.lab.sandbox.inside.holder import Mode

ROOT = Path(__file__).resolve().parents[2]
STUBS = ROOT / "learner" / "ch13_leases.py"


def holder_args(directory: Path, **more: str) -> Namespace:
    """A killed-case holder's parsed command line (no relay: the supplier is never reached)."""
    return Namespace(
        child=Mode.KILLED,
        dir=str(directory),
        relay=None,
        endpoint="http://127.0.0.1:9",
        identity="supplier",
        lease=1.0,
        timeout=1.0,
        **more,
    )


def ready(directory: Path) -> dict:
    return json.loads((directory / "ready.json").read_text())


def test_a_stub_stops_the_sqlite_holder_with_3_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv(IMPL_ENV, str(STUBS))
    args = holder_args(tmp_path, shop=str(tmp_path / "shop.db"))
    assert holder.child_main(args) == 3
    said = ready(tmp_path)
    assert said["not_started"] == "open_worker_shop"
    assert said["section"].startswith("13b") and said["where"].endswith("ch13_leases.py")


def test_a_stub_stops_the_postgres_holder_with_3_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv(pg_holder.DSN_ENV, "postgresql://nowhere")
    monkeypatch.setattr(pg_shop, "connect", lambda dsn: None)  # claim() stops before using it
    assert pg_holder.child_main(holder_args(tmp_path, pg=str(STUBS))) == 3
    said = ready(tmp_path)
    assert said["not_started"] == "claim" and said["where"].endswith("ch13_postgres.py")


def test_a_reach_for_the_reference_stops_the_holder_with_4(tmp_path, monkeypatch):
    reaching = tmp_path / "ch13_leases.py"
    reaching.write_text("import solutions.anything\n")  # never loaded before, by any test
    monkeypatch.setenv(IMPL_ENV, str(reaching))
    monkeypatch.setattr(sys, "meta_path", [_ImportBlocker(), *sys.meta_path])
    args = holder_args(tmp_path, shop=str(tmp_path / "shop.db"))
    assert holder.child_main(args) == 4
    assert ready(tmp_path)["reference_blocked"].startswith("reference blocked: ")


def test_both_holders_stop_through_one_function():
    """The twin handler is gone: ``pg_holder`` stops through ``holder.cannot_hold``."""
    assert pg_holder.cannot_hold is holder.cannot_hold
    for module in (holder, pg_holder):
        source = Path(module.__file__).read_text(encoding="utf-8")
        assert source.count('"not_started"') == (module is holder), module.__name__
