"""``make demo``: the checkpoint against the reference, its evidence path,
then the recovered shop's report."""

from __future__ import annotations


def test_the_demo_shows_the_recovery_and_the_shop_before_and_after(demo_run):
    result = demo_run
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    out = result.stdout
    assert (
        "PASS  2 killed holder: exit -9, generation 1->2, DONE, ledger 1 order, model calls 0"
        in out
    )
    assert "checkpoint passed (7/7 cases" in out
    assert "evidence (every figure observed in this run): .scratch/checkpoint-evidence.json" in out
    before, after = out.split("The same shop after the replacement recovered it")
    assert (
        "running 1" in before.split("shop-before-recovery.db")[-1]
        and "reserved 2700, spent 0" in before
    )
    assert (
        "finished 1 (DONE 1)" in after
        and "lucy-worker#2" in after
        and "reserved 0, spent 2700" in after
    )
