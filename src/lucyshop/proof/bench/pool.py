"""A pool of bench worker processes that run cells together: released at once, timed together.

The workers are started once per process count and reused for every cell, so a cell costs
its measurement and not eight interpreter start-ups. Every process is ended when the pool's
``with`` block ends, however it ends.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Self

from lucyshop import IMPL_ENV
from lucyshop.lab.services.processes import (
    SharedGroupChildren,
    python_argv,
    wait_exit,
    wait_for_file,
    write_ready,
)

READY_TIMEOUT = 120.0


class Pool:
    def __init__(self, directory: Path, processes: int, impl: Path) -> None:
        self.directory = directory
        self.processes = processes
        self.impl = impl
        self.children = SharedGroupChildren()
        self.procs: list[Any] = []
        self.k = 0

    def __enter__(self) -> Self:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.children.__enter__()
        env = os.environ | {IMPL_ENV: str(self.impl)}
        for index in range(self.processes):
            log = open(self.directory / f"worker-{index}.err", "wb")
            argv = python_argv(
                "lucyshop.proof.bench.worker",
                "--dir",
                str(self.directory),
                "--index",
                str(index),
                "--impl",
                str(self.impl),
            )
            self.procs.append(self.children.spawn(argv, env=env, stderr=log))
            log.close()
        return self

    def run(self, cell: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
        """Hand every worker ``cell``, release them together, and return their records."""
        k, self.k = self.k, self.k + 1
        write_ready(self.directory / f"cell-{k}.json", cell | {"k": k})
        for index, proc in enumerate(self.procs):
            wait_for_file(
                self.directory / f"ready-{k}-{index}.json", timeout=READY_TIMEOUT, proc=proc
            )
        write_ready(self.directory / f"go-{k}.json", {})
        return [
            wait_for_file(self.directory / f"done-{k}-{index}.json", timeout=timeout, proc=proc)
            for index, proc in enumerate(self.procs)
        ]

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                write_ready(self.directory / f"cell-{self.k}.json", {"stop": True})
                for proc in self.procs:
                    wait_exit(proc, timeout=30)
        finally:
            self.children.__exit__(*exc)
