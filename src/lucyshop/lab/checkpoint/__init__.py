"""The process-kill checkpoints' machinery (SQLite; exercise 7 on PostgreSQL). The cases a
student reads are in ``checkpoints/``; everything they stand on is here:

- ``cases``: the case list, stated once (numbers, names, tags, holder modes), and the judge's
  word on one case (``Case``); a leaf;
- ``launch``: a checkpoint's command, for whoever starts one; a leaf;
- ``runner``: the command line, a sandbox per case, the evidence file, the judge at the end;
- ``shop``: what a process case stands on in either checkpoint (supplier, holder child), and
  one SQLite case's shop file and expectations; ``postgres``: one PostgreSQL case's schema,
  role and expectations, and that checkpoint for the runner;
- ``expectations``: the failed expectation that says what differs, the refusals a stale holder
  must get, the records a holder child leaves for its parent;
- ``rival``: the takeover between a holder check and its write, at moments this side picks;
- ``judge``: the trusted result, read from the files each case kept;
- ``demo``: ``make demo``.

The holder children themselves run in the sandbox (``lucyshop.lab.sandbox.inside``); what
they and this side both read sits in leaves below it: their modes
(``lucyshop.lab.services.holder_modes``) and the time limits (``lucyshop.lab.services.limits``).
"""
