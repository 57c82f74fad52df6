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

from lucyshop.lab.evidence import pins, receipts
from lucyshop.lab.evidence.stats import binomial_two_sided, mann_whitney, median_interval
from lucyshop.lab.loader import ROOT

EVIDENCE = ROOT / "evidence"  # what the course shows: the chapter's experiments and exercises
PROOF = ROOT / "proof" / "receipts"  # the kit's proof of itself
COMMITTED = {  # every receipt the kit commits, where, and the schema it must have
    "ch13-leases-receipt.json": (EVIDENCE, "leases"),
    "ch13-exercise5-renewal-receipt.json": (EVIDENCE, "exercise5"),
    "ch13-exercise6-records-receipt.json": (EVIDENCE, "exercise6"),
    "ch13-skew-receipt.json": (EVIDENCE, "skew"),
    "bench.json": (PROOF, "bench"),
    "test-time.json": (PROOF, "testtime"),
    "gradescope-run.json": (PROOF, "gradescope-run"),  # make autograder-proof
    # the same proof with the sandbox forced to its unprivileged-user mode (a container
    # without user namespaces): python -m lucyshop.proof.gradescope.stockimage --isolation user
    #   --evidence proof/receipts/gradescope-run-user.json
    "gradescope-run-user.json": (PROOF, "gradescope-run"),
}
OPTIONAL = {"test-time.json"}  # written by `make test-time`, itself a whole make test run


@pytest.mark.parametrize("folder", [EVIDENCE, PROOF], ids=["evidence", "proof"])
def test_every_committed_json_has_a_schema(folder: Path) -> None:
    present = {path.name for path in folder.glob("*.json")}
    mine = {name for name, (where, _schema) in COMMITTED.items() if where == folder}
    assert present <= mine, "a receipt without a schema"
    assert mine - OPTIONAL <= present, "a receipt the kit commits is missing"


@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_each_committed_receipt_was_measured_on_the_code_that_decides_its_figures(
    name: str,
) -> None:
    """A receipt whose pinned files changed since it was measured must be measured again
    (``make evidence-status`` lists what else changed: set-up files, reported only)."""
    path = COMMITTED[name][0] / name
    if not path.exists():
        pytest.skip(f"{name} has not been measured on this checkout")
    stale = pins.Staleness.of(path).stale
    assert stale == [], f"{name} is stale, measure it again: {', '.join(map(str, stale))} changed"


def plant(root: Path, files: dict[str, str]) -> dict:
    """Files under ``root``, and a receipt whose provenances recorded them as they are now."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    code = {name: receipts.file_record(root / name)["sha256"] for name in files}
    return {"provenance": {"code": code}, "runs": [{"provenance": {"code": code}}]}


def test_a_changed_or_gone_pinned_file_is_stale_where_it_sits(tmp_path: Path) -> None:
    receipt = plant(tmp_path, {"src/run.py": "x = 1\n", "solutions/ch13_leases.py": "y = 2\n"})
    (tmp_path / "receipt.json").write_text(json.dumps(receipt))
    assert pins.Staleness.of(tmp_path / "receipt.json", tmp_path).stale == []
    (tmp_path / "src/run.py").write_text("x = 2\n")
    (tmp_path / "solutions/ch13_leases.py").unlink()
    stale = pins.Staleness.of(tmp_path / "receipt.json", tmp_path).stale
    assert list(map(str, stale)) == [
        "src/run.py",
        "solutions/ch13_leases.py (gone)",
        "src/run.py (/runs/0)",
        "solutions/ch13_leases.py (gone) (/runs/0)",
    ]


def test_a_changed_makefile_pyproject_or_test_file_is_reported_not_stale(tmp_path: Path) -> None:
    set_up = {"Makefile": "test:\n", "pyproject.toml": "[x]\n", "tests/conftest.py": "\n"}
    (tmp_path / "receipt.json").write_text(json.dumps(plant(tmp_path, set_up)))
    for name in set_up:
        (tmp_path / name).write_text("edited\n")
    found = pins.Staleness.of(tmp_path / "receipt.json", tmp_path)
    assert found.stale == []
    assert sorted({c.path for c in found.drifted}) == sorted(set_up)
    assert found.lines()[0] == "receipt.json: fresh"
    assert "  set-up, changed (reported only): Makefile" in found.lines()


def test_evidence_status_names_each_receipt_and_what_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    (evidence / "old.json").write_text(json.dumps(plant(tmp_path, {"src/a.py": "a\n"})))
    (evidence / "new.json").write_text(json.dumps({"provenance": {"code": {}}}))
    (tmp_path / "src/a.py").write_text("b\n")
    assert pins.main([str(evidence), "--kit", str(tmp_path)]) == 0, "a report, never a failure"
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "new.json: fresh"
    assert printed[1] == "old.json: STALE, measure it again"
    assert printed[2:] == [
        "  pinned, changed: src/a.py",
        "  pinned, changed: src/a.py (/runs/0)",
    ]


@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_each_committed_receipt_has_its_schemas_shape(name: str) -> None:
    folder, schema = COMMITTED[name]
    if name in OPTIONAL and not (folder / name).exists():
        pytest.skip(f"{name} has not been measured on this checkout (make test-time)")
    assert receipts.validate(folder / name, schema) == []


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
