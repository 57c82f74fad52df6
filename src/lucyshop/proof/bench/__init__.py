"""``make bench``: how fast the protocol runs, measured beside its peers in one run on one file
system.

    python -m lucyshop.proof.bench --impl solutions --out proof/receipts/bench.json [--repeats 3]

One module per section, each with ``NAME``, ``measure(options) -> dict`` and
``lines(result) -> list[str]`` (and ``targets(result)`` where the issue sets one); ``cli``
runs them in the order of ``SECTIONS``. A new timing section is one more module there.

- ``queues``: claim+finish and claim+observe+finish cycles/s at 1, 4 and 8 processes and
  300, 3,000 and 9,900 queued items, beside litequeue (pop + done) and persist-queue
  (``SQLiteAckQueue`` get + ack), at synchronous=FULL and NORMAL; duplicates, lock errors and
  the p99 claim latency per row.
- ``fence``: ``observe`` (holder check + insert) against the same insert without the
  holder check.
- ``checkpoint``: the real lease waits against everything else the checkpoint does.
- ``detection``: |measured - predicted| detection delay in the committed Part A receipt.
- ``feedback``: a ``make check`` of the solutions with a warm environment.
- ``grading``: a class of copies of the solutions graded with their exercises and checkpoint
  (``speed``, also ``python -m lucyshop.proof.bench.speed``).

Every figure is a median over repeats with its spread. Nothing here asserts a speed: the
machines are shared, so the figures are written beside their targets, never tested against
a clock.
"""
