"""The checkpoints' holder children stop the same way before they hold any work: a stub exits
3 and names itself in ``ready.json``, a reach for the reference exits 4 and says so. Run here in
this process on the stubs, with no supplier and no server behind them (they stop first). And
the killed-holder case opens the same way in both checkpoints (``Holding.kill_holder``), and a
holder in a sandbox is recorded by the pid this machine knows it by."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from argparse import Namespace
from pathlib import Path
from types import SimpleNamespace

import psutil

from lucyshop import IMPL_ENV
from lucyshop.lab.checkpoint.cases import KILLED
from lucyshop.lab.checkpoint.shop import Holding, host_pid, namespace_pids
from lucyshop.lab.given import pg_shop
from lucyshop.lab.loader import _ImportBlocker
from lucyshop.lab.sandbox import jail
from lucyshop.lab.sandbox.inside import holder, pg_holder
from lucyshop.lab.services.holder_modes import Mode
from lucyshop.lab.services.limits import WAIT_SECONDS
from lucyshop.lab.services.processes import wait_until
from lucyshop.status.signals import pid_alive

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
    assert said["not_started"] == "claim"  # the shop and the queue come written
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
    """The twin handler is gone: ``pg_holder`` stops through ``holder.cannot_go_on``."""
    assert pg_holder.cannot_go_on is holder.cannot_go_on
    for module in (holder, pg_holder):
        source = Path(module.__file__).read_text(encoding="utf-8")
        assert source.count('"not_started"') == (module is holder), module.__name__


class KilledHolding(Holding):
    """A case world whose holder is a sleeping process of this test's, with its events kept."""

    def __init__(self, directory: Path) -> None:
        self.events: list[str] = []
        run = SimpleNamespace(event=lambda _tag, what, **_facts: self.events.append(what))
        super().__init__(run, box=None, directory=directory, case=KILLED)

    def start_holder(self) -> tuple[subprocess.Popen, dict]:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        self.event("holder ready", pid=child.pid)
        return child, {"pid": child.pid}

    def competing_claim_gets_nothing(self) -> None:
        self.event("competing claim", got=None)


def test_the_killed_case_opens_the_same_way_in_both_checkpoints(tmp_path):
    """``Holding.kill_holder``, the opening both killed-holder cases share: the holder starts,
    a rival's claim gets nothing, then SIGKILL, and its exit status is the signal's."""
    world = KilledHolding(tmp_path / "case3")
    ready, status = world.kill_holder()
    assert status == -signal.SIGKILL and ready["pid"] > 0
    assert world.events == ["holder ready", "competing claim", "holder exited"]
    for checkpoint in ("ch13_worker_recovery.py", "ch13_postgres_recovery.py"):
        source = (ROOT / "checkpoints" / checkpoint).read_text(encoding="utf-8")
        assert "shop.kill_holder()" in source and "SIGKILL)" not in source, checkpoint


SLEEPER = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"


def test_a_sandboxed_holder_is_known_by_its_pid_here_and_gone_once_killed(tmp_path):
    """A process in the sandbox knows its pid in the sandbox's PID namespace alone (under
    bubblewrap a small number, which on this machine may name a kernel thread): the checkpoint
    records the pid this machine knows it by, so ``lucy status`` sees a killed holder gone."""
    box = jail.Jail(tmp_path, (tmp_path,))
    proc = box.popen([sys.executable, "-c", SLEEPER], env={}, stdout=subprocess.PIPE, text=True)
    try:
        inside = int(proc.stdout.readline())  # ends with the child, at the latest
        host = host_pid(proc, inside)
        assert host is not None and pid_alive(host)
        assert psutil.Process(host).cmdline()[-1] == SLEEPER
        assert namespace_pids(host)[-1] == inside
        if box.mode == "bwrap":
            assert host != inside and namespace_pids(host) == [host, inside]
        proc.send_signal(signal.SIGKILL)  # as the killed-holder case does
        proc.wait(timeout=WAIT_SECONDS)
        wait_until(lambda: not pid_alive(host), timeout=WAIT_SECONDS, what="the holder to be gone")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=WAIT_SECONDS)
