"""Hostile students against what the trusted side holds for a sandbox (issue 47): an answer of
the served shop is bounded in bytes as it is fetched, and a sandbox's memory as a whole.

- ``hostile/big_answer.py``: ``observe``, handed the served stand-in, selects a gigabyte made
  on the fly, in values and rows the stand-in allowed. The trusted side once grew to 2.9 GB and
  blamed the worker for the frame. Its processes must stay under 1 GiB, and the row say that
  the served shop stopped reading its own answer.
- ``hostile/memory_hog.py``: ``percentile`` starts three children of 1.3 GiB at once, each
  under the per-process limit. All three once held their memory; a sandbox's memory limit
  (``lucyshop.lab.sandbox.jail.MEMORY``) must end one.
"""

from __future__ import annotations

import re

import pytest
from hostile_checks import MARKS, hand_in, hostile, leftovers, reference, run_check, short_tmpdir
from test_hostile_wire import PEAK_BYTES, measured_check

from lucyshop.lab.sandbox import jail
from lucyshop.lab.sandbox.host import cgroups

pytestmark = MARKS

FAST = ("--no-measured", "--no-checkpoint")


def test_an_answer_of_a_gigabyte_is_refused_by_the_trusted_side_in_bytes(tmp_path):
    with short_tmpdir() as tmpdir:
        text = reference() + hostile("big_answer", rows=1000, megabytes=1)
        checked, peak = measured_check(hand_in(tmp_path, text), tmpdir, *FAST, "--test-timeout=30")
        left = leftovers(checked.marker, str(tmpdir))
    assert checked.functions()["observe"] == "FAILING", checked.output[-3000:]
    messages = [failure["message"] for failure in checked.rows()["observe"]["failures"]]
    assert any("served shop stopped reading the answer" in m for m in messages), messages
    assert not any("its worker" in m for m in messages), messages
    assert peak < PEAK_BYTES, f"the run's processes peaked at {peak >> 20} MiB"
    assert left == [], left


@pytest.mark.skipif(
    cgroups.home("memory")[0] is None,
    reason=f"no memory cgroup here ({cgroups.missing() or 'not root'}): RLIMIT_AS bounds each"
    " process of a sandbox, not the sandbox",
)
def test_a_sandbox_holds_no_more_memory_than_its_limit_whatever_its_children(tmp_path):
    mib = 1300
    assert 3 * mib << 20 > jail.MEMORY > 2 * mib << 20, "three must not fit, two must"
    with short_tmpdir() as tmpdir:
        text = reference() + hostile("memory_hog", children=3, mib=mib)
        checked = run_check(hand_in(tmp_path, text), tmpdir, *FAST, "--test-timeout=90")
        left = leftovers(checked.marker, str(tmpdir))
    messages = [failure["message"] for failure in checked.rows()["percentile"]["failures"]]
    held = {int(found) for m in messages for found in re.findall(r"held=(\d) of 3", m)}
    assert held and max(held) < 3, messages
    assert left == [], left
