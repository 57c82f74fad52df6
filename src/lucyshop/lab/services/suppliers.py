"""The supplier as a test and lab fixture: a real ``python -m lucyshop.supplier`` process.

``with supplier_process(tmp) as supplier:`` starts it, waits for its ready file with a
deadline, and ends it in ``__exit__`` whatever happened.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lucyshop.lab.services.processes import SharedGroupChildren, python_argv, wait_for_file
from lucyshop.supplier import SupplierClient


@dataclass(frozen=True)
class RunningSupplier:
    endpoint: str
    identity: str
    pid: int
    database: Path
    proc: subprocess.Popen[Any]

    def client(self, timeout: float = 1.0) -> SupplierClient:
        return SupplierClient(self.endpoint, identity=self.identity, timeout=timeout)

    def set_faults(self, **faults: float) -> dict[str, Any]:
        return self.client(timeout=5.0).set_faults(**faults)

    def health(self) -> dict[str, Any]:
        return self.client(timeout=5.0).health()


@contextmanager
def supplier_process(
    directory: str | Path,
    *,
    identity: str = "dairy",
    drop_rate: float = 0.0,
    delay_rate: float = 0.0,
    delay_seconds: float = 0.0,
    seed: int = 0,
    reject_skus: Sequence[str] = (),
    start_timeout: float = 10.0,
) -> Iterator[RunningSupplier]:
    """Run a supplier process with its ledger, ready file and log in ``directory``; always end it.

    ``with supplier_process(directory) as supplier``: ``supplier.client(timeout=...)`` is a
    ``SupplierClient`` (for ``approval.execute`` and ``reconcile``); ``supplier.set_faults(
    drop_next=1)`` loses its next reply, ``set_faults(delay_next=1, delay_seconds=S)`` holds it
    back S seconds after the order is committed; ``supplier.database`` is the path of its own
    ledger, which ``lucyshop.supplier.ledger_orders(path)`` reads without asking it.
    Restarting on the same directory keeps the ledger, as a real supplier would.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    database = directory / f"{identity}-ledger.sqlite"
    ready = directory / f"{identity}-ready.json"
    ready.unlink(missing_ok=True)
    options = {
        "--database": database,
        "--port": 0,
        "--ready": ready,
        "--identity": identity,
        "--drop-rate": drop_rate,
        "--delay-rate": delay_rate,
        "--delay-seconds": delay_seconds,
        "--seed": seed,
        "--reject-skus": ",".join(reject_skus),
    }
    words = [str(word) for option in options.items() for word in option]
    argv = python_argv("lucyshop.supplier", *words, blocked=False)
    with SharedGroupChildren() as children:
        with open(directory / f"{identity}.log", "ab") as log:
            proc = children.spawn(argv, stderr=log)
        info = wait_for_file(ready, timeout=start_timeout, proc=proc)
        yield RunningSupplier(info["endpoint"], identity, proc.pid, database, proc)
