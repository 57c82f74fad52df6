"""``make soak``: a seeded chaos soak of a chapter-13 implementation, with real processes.

    python -m lucyshop.proof.soak [--impl learner|solutions|PATH] [--seconds 120] [--seed 13]
                                  [--workers 4] [--items 400] [--lease 1.5] [--keep]
                                  [--report FILE]
                                  [--stale transcript|propose|supplier|completion ...]

What runs, all on this machine:

* one supplier process (chapter 12) that drops the reply after committing, or delays it past
  the client's timeout, at seeded random;
* ``--workers`` worker processes, each looping claim -> observe -> propose -> approve ->
  execute -> finish over a queue of ``--items`` assignments in several sessions, with a real
  lease of ``--lease`` seconds and a supplier timeout shorter than it;
* a chaos loop that, on a schedule drawn from the seed, SIGKILLs a worker, or SIGSTOPs one
  past its lease and SIGCONTs it later, and restarts killed workers as a service manager
  would (sometimes under the shared service name, so only generations tell them apart).

``--stale BOUNDARY`` also makes one stale write at that boundary for certain, by a script
rather than by chance (``soak.script``): the first turn to reach it stops there until another
worker has taken its work over, then writes. Every write waits for SQLite's write lock longer
than chaos can hold it (``Config.busy_timeout_ms``: a worker paused inside a write transaction
holds the lock for its whole pause), so a lock timeout fails the soak only when something held
a transaction past any pause.

Then it drains: chaos stops, every paused worker is continued, the workers are ended where
they stand, ``recover_once`` (owner ``drain``) takes every unfinished assignment until it is
IDLE, and ``reconcile`` settles the uncertain orders. Last, it reads both SQLite files
directly (the shop and the supplier's ledger) and confirms, naming the work ids where one fails:

1. every assignment finished exactly once, with exactly one outcome row;
2. the supplier ledger holds one order per accepted operation (and per rejected one), none
   the shop does not know, no operation twice, no assignment with two orders;
3. spent cents equal the accepted amounts, in the shop and in the ledger; reserved cents
   equal what is still uncertain (zero after reconcile, unless the supplier never saw it);
4. no transcript row or outcome was written by a generation that did not hold the running
   work's lease at that moment;
5. every stale write was refused by the fence: with PermissionError (not by a constraint
   or a crash), including the writes a superseded worker attempts on purpose, and no supplier
   send by a generation that had been superseded before its ``execute`` began;
6. each claim advanced the lease generation by exactly one.

The proof that no superseded generation wrote is kept in the shop file itself: before any
worker starts, the soak adds history tables and triggers (``soak_*``) that record, inside
the very transaction of every transcript and outcome insert, the lease generation current at
that moment, and every lease row each claim wrote. Workers also append what they attempted
(each write, its generation, accepted or refused, with times) to their own JSON-lines log.

The seed fixes the chaos schedule (when, what, which worker slot), the supplier's faults and
the workers' pauses between steps; process timing is the machine's, so two runs of one seed
differ in detail but never in what must hold.

Exit status: 0 every invariant held, 1 one failed, 3 the implementation is still a stub.
"""
