"""The lab: what checks, grades, measures and teaches chapter 13. The shop itself (the runtime:
store, queue, approval, the supplier, models, status) never imports it.

Words used across the lab:

- **chapter file**: a ``ch13_leases.py``, the learner's (``learner/``), the reference
  (``solutions/``) or a hand-in; ``$LEASES_IMPL`` or ``--impl`` names it. **answers**: the
  ``exercises.py`` beside it.
- **stub**: a function whose body is still ``raise NotStarted(...)``; its row is NOT STARTED.
- **row**: one line of ``make check``'s table (``lab.check``), one chapter function or one
  exercise (a ``Subject``), with its status: NOT STARTED, FAILING, PASSING, LEFT OUT
  (``--no-measured``) or, in a grade, NOT SUBMITTED. Every status word, the checkpoint's and a
  verdict's too, is a ``StrEnum`` in ``lab.statuses``.
- **rows set aside**: rows that run no test and take their status from the check itself
  (exercises 5 and 6 under ``--no-measured``; exercise 7 without its file or PostgreSQL).
- **sandbox**: the bubblewrap jail (``lab.sandbox``) in which every student line runs; nothing
  it reports is believed, only files the trusted side reads back.
- **checkpoint**: ``checkpoints/ch13_worker_recovery.py``, real processes killed and paused
  around a real supplier; its seven **cases** are read by the judge from the files each kept.
  What a case's run expects to see is its **expectations** (``lab.checkpoint.expectations``).
- **judge** (``lab.checkpoint.judge``), and only it: the trusted reader that turns a
  checkpoint's kept files into case results, the checkpoint's **result**. Nothing else in the
  lab is named a judge, and nothing else judges: the sandbox's trusted side *decides*, a hook
  *vets* an event, a soak invariant *finds*.
- **verdict** (``lab.grade.verdict``), and only it: what one check of one file came to (rows,
  cases, status), as ``make grade`` reads it from the check's ``ch13-check/1`` JSON
  (``lab.check.results``, ``schemas/check.json``). A notebook's one-row check is a
  ``check.run(path, only=row)``; a soak invariant's outcome a ``Finding``.
- **check** (``lab.check``): ``make check``, and one run of it on one chapter file, *a check*;
  ``make grade`` runs one per hand-in, and a notebook's ``check("claim")`` is a check of one
  row. Nothing else is a check: a test *tests*, a checkpoint case has *expectations*, the
  judge *confirms* a case, a receipt is *verified* (``verify FILE``), a soak invariant
  *finds*. One use keeps the word, always so named: the chapter's **current-holder check**
  (also the **holder check**), the re-read of the holder inside every controlled write, the
  book's term.
- **report**: what a command writes at the end of a run for a person to read: the soak's
  (``lab.soak.report``), ``make bench``'s ``bench.json``, the grade's similarity report,
  ``lucyshop status``'s four signals. What a child process writes back for its parent is its
  **record** (``child_record``); pytest's reports are pytest's, and ``keep_renewing``'s
  ``report=`` callback is the book's.
- **receipt**: a JSON file in ``evidence/`` with every raw observation of a measurement and
  its provenance (model, backend, host, date, command, code hashes); its figures are
  recomputed from the observations, never typed in.
- **stand-in**: the scripted model (``lab.model.scripted``) the measured exercises are
  graded on, so that no grade depends on how fast the machine is.
"""

from lucyshop.lab.given.stubs import NotStarted

__all__ = ["NotStarted"]
