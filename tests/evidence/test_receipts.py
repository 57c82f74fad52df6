"""The receipt engine: every committed receipt has its schema's shape, the write is whole or
nothing, the comparison catches every kind of edit, and the statistics match hand-computed
values."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from lucyshop.lab.evidence import receipts, testtime
from lucyshop.lab.evidence.stats import binomial_two_sided, mann_whitney, median_interval
from lucyshop.lab.loader import ROOT

EVIDENCE = ROOT / "evidence"
COMMITTED = {  # every receipt the kit commits, and the schema it must have
    "ch13-leases-receipt.json": "leases",
    "ch13-exercise5-renewal-receipt.json": "exercise5",
    "ch13-exercise6-records-receipt.json": "exercise6",
    "bench.json": "bench",
    "ch13-skew-receipt.json": "skew",
    "test-time.json": "testtime",
    "gradescope-run.json": "gradescope-run",  # make autograder-proof
    # the same proof with the sandbox forced to its unprivileged-user mode (a container
    # without user namespaces): python -m lucyshop.lab.grade.gradescope.stockimage --isolation user
    "gradescope-run-user.json": "gradescope-run",
}
OPTIONAL = {"test-time.json"}  # written by `make test-time`, itself a whole make test run


def test_every_committed_json_in_evidence_has_a_schema() -> None:
    present = {path.name for path in EVIDENCE.glob("*.json")}
    assert present <= set(COMMITTED), "a receipt without a schema"
    assert set(COMMITTED) - OPTIONAL <= present, "a receipt the kit commits is missing"


def provenances(document: object, where: str = "") -> list[tuple[str, dict]]:
    """Every ``provenance`` in a receipt, with where it is: the top level's, and each run's
    that carries its own (``make test-time``'s quiet and loaded runs, ``bench.json``'s
    ``make_test``)."""
    found = []
    if isinstance(document, dict):
        for key, value in document.items():
            if key == "provenance" and isinstance(value, dict):
                found.append((where or "/", value))
            else:
                found += provenances(value, f"{where}/{key}")
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += provenances(value, f"{where}/{index}")
    return found


def stale(document: object) -> list[str]:
    """``where: path`` for each file whose sha256 differs from the one a provenance kept."""
    return [
        f"{where}: {path}"
        for where, provenance in provenances(document)
        for path, digest in provenance.get("code", {}).items()
        if receipts.file_record(ROOT / path)["sha256"] != digest
    ]


@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_each_committed_receipt_was_measured_on_the_code_it_names(name: str) -> None:
    """A receipt, or a run inside one, whose code has changed since it was measured must be
    measured again."""
    if not (EVIDENCE / name).exists():
        pytest.skip(f"{name} has not been measured on this checkout")
    if name == "test-time.json" and os.environ.get(testtime.REWRITING):
        pytest.skip("make test-time is rewriting test-time.json in this very run")
    changed = stale(json.loads((EVIDENCE / name).read_text(encoding="utf-8")))
    assert changed == [], f"{name} is stale: measure it again ({', '.join(changed)} changed)"


def test_a_run_measured_on_other_code_is_found_stale_where_it_sits() -> None:
    here = receipts.file_record(ROOT / "Makefile")
    kept = {"code": {here["path"]: here["sha256"]}}
    moved = {"code": {here["path"]: "0" * 64}}
    document = {"provenance": kept, "quiet": {"provenance": kept}, "loaded": {"provenance": moved}}
    assert stale(document) == [f"/loaded: {here['path']}"]
    assert stale({"runs": [{"provenance": moved}]}) == [f"/runs/0: {here['path']}"]


@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_each_committed_receipt_has_its_schemas_shape(name: str) -> None:
    if name in OPTIONAL and not (EVIDENCE / name).exists():
        pytest.skip(f"{name} has not been measured on this checkout (make test-time)")
    assert receipts.validate(EVIDENCE / name, COMMITTED[name]) == []


@pytest.mark.parametrize("path", sorted(receipts.SCHEMAS.glob("*.json")), ids=lambda p: p.name)
def test_each_schema_is_a_valid_json_schema(path: Path) -> None:
    Draft202012Validator.check_schema(json.loads(path.read_text()))


def provenance() -> dict:
    return receipts.finish(receipts.provenance(command=["-m", "probe"], code=[__file__]))


def test_provenance_names_host_date_command_load_and_code() -> None:
    record = provenance()
    assert record["command"][1:] == ["-m", "probe"]
    assert list(record["code"]) == ["tests/evidence/test_receipts.py"]
    assert len(record["code"]["tests/evidence/test_receipts.py"]) == 64
    assert len(record["loadavg_start"]) == len(record["loadavg_end"]) == 3
    assert record["seconds"] >= 0 and record["started_utc"].endswith("+00:00")


def test_a_missing_provenance_key_breaks_the_shape() -> None:
    record = provenance()
    del record["loadavg_end"]
    record["code"] = {"x.py": "not a sha256"}
    problems = receipts.validate({"schema": 2, "exercise": 6, "provenance": record}, "exercise6")
    assert any("'loadavg_end' is a required property" in p for p in problems)
    assert any(p.startswith("provenance/code/x.py") for p in problems)


def test_write_receipt_writes_the_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "receipt.json"
    receipts.write_receipt(target, {"a": [1, 2.5], "b": None})
    assert json.loads(target.read_text()) == {"a": [1, 2.5], "b": None}
    assert os.listdir(target.parent) == ["receipt.json"]


def test_a_receipt_is_fsynced_then_its_directory_and_others_may_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append("directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    target = tmp_path / "receipt.json"
    receipts.write_receipt(target, {"a": 1})
    assert synced == ["file", "directory"]  # the text, then the rename
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask  # as any file it creates


@pytest.mark.parametrize("bad", [math.nan, math.inf, object()])
def test_data_that_is_not_strict_json_changes_nothing(tmp_path: Path, bad: object) -> None:
    target = tmp_path / "receipt.json"
    receipts.write_receipt(target, {"before": True})
    with pytest.raises((ValueError, TypeError)):
        receipts.write_receipt(target, {"figure": bad})
    assert json.loads(target.read_text()) == {"before": True}
    assert os.listdir(tmp_path) == ["receipt.json"], "no temporary file left behind"


def test_compare_names_an_edited_a_missing_and_an_extra_figure() -> None:
    recomputed = {"pilot": {"p50": 1.5, "turns": 4}, "share": 0.25, "delays": [1.0, 2.0]}
    stored = {"pilot": {"p50": 1.5000001, "turns": 4}, "delays": [1.0, 2.0], "extra": 1}
    found = dict(receipts.compare(stored, recomputed))
    assert found["pilot.turns"] == "" and found["delays.1"] == ""
    assert "the receipt says 1.5000001" in found["pilot.p50"], "an observed sample is exact"
    assert found["share"].startswith("missing from the receipt")
    assert found["extra"].startswith("in the receipt (1) but not derived")


def test_compare_allows_arithmetic_rounding_only_on_derived_floats() -> None:
    found = dict(receipts.compare({"mean": 0.1 + 0.2}, {"mean": 0.3}))
    assert found["mean"] == ""
    assert dict(receipts.compare({"count": 3.0}, {"count": 3}))["count"], "an int stays an int"


def test_binomial_two_sided_matches_hand_computed_values() -> None:
    # 12 of 20 against 10 expected: 1 - P(9 <= X <= 11) for X ~ B(20, 1/2)
    inside = sum(math.comb(20, k) for k in (9, 10, 11)) / 2**20
    assert binomial_two_sided(12, 20, 0.5) == pytest.approx(1 - inside, abs=1e-12)
    # 1 of 20 against 2 expected: every count except exactly 2
    assert binomial_two_sided(1, 20, 0.1) == pytest.approx(1 - 190 * 0.1**2 * 0.9**18)
    assert binomial_two_sided(0, 20, 0.0) == 1.0 and binomial_two_sided(1, 20, 0.0) == 0.0
    with pytest.raises(ValueError):
        binomial_two_sided(21, 20, 0.5)


def test_median_interval_is_the_sign_tests_order_statistics() -> None:
    # n = 12: P(X <= 2) = 79/4096 for X ~ Binomial(12, 1/2), so (x(3), x(10)) covers the median
    # with 1 - 2 * 79/4096; leaving out one more value each side would fall below 95%.
    twelve = median_interval([float(v) for v in reversed(range(12))])
    assert (twelve["low"], twelve["high"]) == (2.0, 9.0)
    assert twelve["confidence"] == pytest.approx(1 - 2 * 79 / 4096)
    few = median_interval([3.0, 1.0, 2.0])  # too few for 95%: the whole sample, and what it gives
    assert (few["low"], few["high"], few["confidence"]) == (1.0, 3.0, 0.75)
    with pytest.raises(ValueError):
        median_interval([])


def test_mann_whitney_exact_and_normal() -> None:
    apart = mann_whitney([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert (apart["u"], apart["method"]) == (0.0, "exact")
    assert apart["p_value"] == pytest.approx(2 / 20), "the most extreme of C(6,3) orders, twice"
    assert mann_whitney([1.0, 2.0], [1.0, 2.0])["p_value"] == 1.0
    mixed = mann_whitney([float(i) for i in range(0, 60, 2)], [float(i) for i in range(1, 61, 2)])
    assert mixed["method"] == "normal" and mixed["p_value"] > 0.5, "interleaved: no difference"
    shifted = mann_whitney([float(i) for i in range(30)], [float(i) + 25 for i in range(30)])
    assert shifted["p_value"] < 1e-6
