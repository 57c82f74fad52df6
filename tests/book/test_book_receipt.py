"""Part A's receipt in the book's shape (``docs/evidence/book-ch13/``) is the kit's committed
receipt, mapped and rounded by ``lucyshop.lab.book``, and nothing else: the committed file is
what the code derives now, each field comes from the kit's figure of the same meaning, and the
rounding keeps the chapter's arithmetic on the pilot turns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lucyshop.lab import book
from lucyshop.lab.evidence import receipts
from lucyshop.lab.experiment.receipt import RULES
from lucyshop.lab.loader import load_impl

KIT = json.loads(book.KIT_RECEIPT.read_text(encoding="utf-8"))


def test_the_committed_book_receipt_is_derived_from_the_kit_receipt() -> None:
    committed = json.loads(book.BOOK_RECEIPT.read_text(encoding="utf-8"))
    assert committed == book.book_receipt(KIT, book.KIT_RECEIPT), (
        f"{receipts.shown(book.BOOK_RECEIPT)} is stale: make book-receipt rewrites it"
    )


def test_it_names_its_source_receipt() -> None:
    source = json.loads(book.BOOK_RECEIPT.read_text())["provenance"]["source"]
    assert source["path"] == "evidence/ch13-leases-receipt.json"
    assert source == receipts.file_record(book.KIT_RECEIPT) | {
        "model": KIT["provenance"]["model"]["name"],
        "backend": KIT["provenance"]["backend"],
        "host": KIT["provenance"]["hostname"],
        "date": KIT["provenance"]["started_utc"],
        "command": KIT["provenance"]["command"],
        "quick": KIT["settings"]["quick"],
    }


def test_every_lease_rule_of_the_kit_has_the_chapters_name() -> None:
    assert set(book.RULE_NAMES) == set(RULES)


@pytest.mark.parametrize("q", [50, 90, 100])
def test_rounding_keeps_the_pilots_percentiles(q: int) -> None:
    """The chapter computes its percentiles from ``pilot_turn_seconds``: on the rounded turns
    they are the kit's own, rounded."""
    leases = load_impl("solutions")
    pilot = book.book_receipt(KIT, book.KIT_RECEIPT)["pilot_turn_seconds"]
    assert leases.percentile(pilot, q) == round(KIT["figures"]["pilot"][f"p{q}"], book.DECIMALS)


@pytest.mark.parametrize("target", ["0.5", "0.1", "0.05", "0"])
def test_rounding_keeps_the_shortest_leases(target: str) -> None:
    leases = load_impl("solutions")
    pilot = book.book_receipt(KIT, book.KIT_RECEIPT)["pilot_turn_seconds"]
    kit = KIT["figures"]["pilot"]["shortest_lease"][target]
    assert leases.shortest_lease(pilot, float(target)) == round(kit, book.DECIMALS)


def small_receipt() -> dict:
    """A kit receipt cut down to what the mapping reads, with figures that tell fields apart."""
    rule = {
        "lease": 1.23456,
        "predicted_share": 0.1,
        "measured_share": 0.15,
        "stale_completions_accepted": 0,
    }
    return {
        "observations": {"pilot": [{"seconds": 0.12345}, {"seconds": 2.0004}]},
        "figures": {
            "false_expiry": {
                "median": rule,
                "p90": rule | {"lease": 2.0},
                "twice_max": rule | {"measured_share": 0.0},
            },
            "detection": {
                "lease": 4.0008,
                "typical_turn": 0.12345,
                "predicted_delay": 3.96453,
                "measured_mean_delay": 3.97,
            },
            "recovery": {"model-a": {"samples": 5, "placed_again": 3, "looked_up_right_key": 1}},
        },
        "provenance": {
            "model": {"name": "model-a"},
            "backend": "ollama",
            "hostname": "host",
            "started_utc": "2026-01-01T00:00:00+00:00",
            "command": ["python", "-m", "lucyshop.lab.experiment"],
        },
        "settings": {"quick": True},
    }


def test_each_field_comes_from_the_kit_figure_of_its_meaning(tmp_path: Path) -> None:
    source = tmp_path / "kit.json"
    source.write_text(json.dumps(small_receipt()))
    shaped = book.write_book_receipt(source, tmp_path / "book.json")
    assert json.loads((tmp_path / "book.json").read_text()) == shaped
    assert shaped["pilot_turn_seconds"] == [0.123, 2.0]
    assert [row["rule"] for row in shaped["false_expiry"]] == [
        "pilot median",
        "pilot 90th percentile",
        "twice the pilot maximum",
    ]
    assert shaped["false_expiry"][0] == {
        "rule": "pilot median",
        "lease_seconds": 1.235,
        "predicted_false_expiry": 0.1,
        "measured_false_expiry": 0.15,
        "stale_completions_accepted": 0,
    }
    assert [row["lease_seconds"] for row in shaped["false_expiry"]] == [1.235, 2.0, 1.235]
    assert shaped["false_expiry"][2]["measured_false_expiry"] == 0.0
    assert shaped["detection"] == {
        "lease_seconds": 4.001,
        "turn_seconds": 0.123,
        "predicted_mean_delay": 3.965,
        "measured_mean_delay": 3.97,
    }
    assert shaped["recovery"] == [
        {"model": "model-a", "placed_again": 3, "looked_up": 1, "samples": 5}
    ]
    assert shaped["provenance"]["source"]["quick"] is True


def test_the_command_writes_the_receipt(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "nested" / "book.json"
    assert book.main(["--source", str(book.KIT_RECEIPT), "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == book.book_receipt(KIT, book.KIT_RECEIPT)
    assert f"wrote {out}" in capsys.readouterr().out
