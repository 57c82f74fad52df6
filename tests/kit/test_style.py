"""Style is enforced, not hoped for: ruff's formatter finds nothing to change and its linter
nothing to flag on the whole tree, with the 100-column limit (E501) and the complexity ceiling
(C901 <= 12) that pyproject.toml sets.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )


@pytest.mark.parametrize("command", [("format", "--diff"), ("check",)], ids=" ".join)
def test_ruff_is_clean(command):
    result = ruff(*command, "--no-cache", ".")
    assert result.returncode == 0, f"ruff {' '.join(command)} .\n{result.stdout}{result.stderr}"


def test_the_configured_limits_are_100_columns_and_complexity_12():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    assert config["line-length"] == 100
    assert {"E501", "C901"} <= set(config["lint"]["extend-select"])
    assert config["lint"]["mccabe"]["max-complexity"] <= 12
    assert not {"E501", "C901"} & set(config["lint"].get("ignore", []))
    exempt = {
        path
        for path, rules in config["lint"].get("per-file-ignores", {}).items()
        if {"E501", "C901"} & set(rules)
    }
    assert exempt == set(), "no file is exempt from the column limit or the complexity ceiling"
