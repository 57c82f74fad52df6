"""The shared input guards: each boundary accepted, each side of it refused with ValueError."""

from __future__ import annotations

import json
import math
import time

import pytest

from lucyshop import validate


@pytest.mark.parametrize("value", [0, 0.0, 1, 2.5, 3600])
def test_seconds_accepts_finite_numbers_from_0(value):
    assert validate.seconds(value, "wait", most=3600) == float(value)


@pytest.mark.parametrize(
    "value", [-0.001, math.nan, math.inf, -math.inf, 10**400, True, "1", None, 3600.001]
)
def test_seconds_refuses_the_rest_with_a_value_error(value):
    with pytest.raises(ValueError, match="wait must be a finite number of seconds from 0"):
        validate.seconds(value, "wait", most=3600)


def test_positive_seconds_refuse_zero_and_name_the_range():
    with pytest.raises(ValueError, match="ttl must be a finite number of seconds above 0 and"):
        validate.seconds(0, "ttl", positive=True, most=10)


@pytest.mark.parametrize("now", [0, 1000.0, 1.7e9, validate.LATEST])
def test_an_injected_clock_is_accepted_from_0_to_the_year_2100(now):
    assert validate.clock(now) == now


@pytest.mark.parametrize("now", [-1e-9, validate.LATEST + 1, 1e300, 10**400, math.nan, "1"])
def test_an_injected_clock_outside_the_range_names_it(now):
    with pytest.raises(ValueError, match=r"now must be a time from 0 to 4102444800 seconds"):
        validate.clock(now)


def test_no_injected_clock_is_the_time_now():
    assert abs(validate.clock(None) - time.time()) < 60


@pytest.mark.parametrize("value", ["ann", "a" * 100, "Ann Lee", "café"])
def test_a_label_accepts_printable_text_up_to_its_limit(value):
    assert validate.label(value, "owner") == value


@pytest.mark.parametrize(
    "value",
    ["", "  ", "a" * 101, "ann\n", "ann\x00", "ann\x1b[2J", "ann\x7f", "ann\x85", "a\ud800", 5],
)
def test_a_label_refuses_blank_long_control_and_unencodable_text(value):
    with pytest.raises(ValueError, match="owner must be a non-empty label of at most 100"):
        validate.label(value, "owner")


def test_a_label_names_its_forbidden_characters():
    with pytest.raises(ValueError, match="without '#' or control characters"):
        validate.label("ann#2", "owner", forbidden="#")


def test_text_allows_line_breaks_and_names_its_limit():
    assert validate.text("line one\nline two", "reason", most=20) == "line one\nline two"
    with pytest.raises(ValueError, match="reason is 21 characters; the limit is 20"):
        validate.text("x" * 21, "reason", most=20)


@pytest.mark.parametrize("value", [{"a": [1, 2.5, None]}, "text", 10**50])
def test_json_text_is_canonical(value):
    assert validate.json_text(value, "message") == json.dumps(value, sort_keys=True)


@pytest.mark.parametrize(
    "value",
    [math.nan, {1, 2}, object(), {1: "a", "b": 2}, 10**5000],
    ids=["nan", "set", "object", "mixed-keys", "int-5000-digits"],
)
def test_json_text_refuses_what_is_not_json(value):
    with pytest.raises(ValueError, match="the message must be JSON"):
        validate.json_text(value, "message")


def test_json_text_names_its_limit():
    with pytest.raises(ValueError, match="the message is 12 characters of JSON; the limit is 11"):
        validate.json_text("x" * 10, "message", most=11)


@pytest.mark.parametrize("value", [1, 2**63 - 1])
def test_a_row_id_is_an_int_sqlite_can_hold(value):
    assert validate.row_id(value, "work_id") == value


@pytest.mark.parametrize("value", [0, -1, 2**63, True, "1", 1.0, None])
def test_a_row_id_refuses_everything_else(value):
    with pytest.raises(ValueError, match="work_id must be a whole number from 1 to 2"):
        validate.row_id(value, "work_id")


def test_owner_of_reads_the_owner_label_of_a_worker_id():
    assert validate.owner_of("till#2") == "till"
    assert validate.owner_of("till") == "till"
    assert validate.owner_of(None) == ""
    assert validate.owner_of("lucy worker#12") == "lucy worker"
