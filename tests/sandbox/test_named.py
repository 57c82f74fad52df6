"""``lucyshop.lab.check.named``: a path from the sandbox is read only as a regular file of
the scratch, never through a link, never blocking, bounded; else refused naming the function.
"""

from __future__ import annotations

import os

import pytest

from lucyshop.lab.check.named import MAX_RECEIPT, NamedFileRefused, beneath, load_named, read_named


@pytest.fixture
def scratch(tmp_path):
    root = tmp_path / "scratch"
    (root / "run").mkdir(parents=True)
    (root / "run" / "receipt.json").write_text('{"exercise": 6}')
    return root


def test_a_regular_file_of_the_scratch_is_read(scratch):
    assert load_named(scratch / "run" / "receipt.json", [scratch], "f", "receipt") == {
        "exercise": 6
    }


@pytest.mark.parametrize("kind", ["outside", "link", "fifo", "device", "not a path", "too big"])
def test_anything_else_is_refused_naming_the_function(scratch, tmp_path, kind):
    secret = tmp_path / "secret.json"
    secret.write_text('{"secret": 1}')
    named = {
        "outside": secret,
        "link": scratch / "run" / "link.json",
        "fifo": scratch / "run" / "fifo.json",
        "device": "/dev/zero",
        "not a path": 42,
        "too big": scratch / "run" / "big.json",
    }[kind]
    if kind == "link":
        named.symlink_to(secret)
    elif kind == "fifo":
        os.mkfifo(named)
    elif kind == "too big":
        named.write_bytes(b" " * (MAX_RECEIPT + 1))
    with pytest.raises(NamedFileRefused, match=r"^exercise_6_records\(\) (named its|returned)"):
        load_named(named, [scratch], "exercise_6_records", "receipt")


def test_a_directory_swapped_for_a_link_after_the_check_is_not_followed(scratch, tmp_path):
    """The path as first looked at is not what ``beneath`` opens: a directory of the path that
    became a link in between is refused, its target never read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "receipt.json").write_text('{"secret": 1}')
    (scratch / "run" / "receipt.json").unlink()
    (scratch / "run").rmdir()
    (scratch / "run").symlink_to(outside)
    with pytest.raises(OSError), beneath(scratch, scratch / "run"):
        pass
    with pytest.raises(NamedFileRefused):
        read_named(scratch / "run" / "receipt.json", [scratch], "f", "receipt")
