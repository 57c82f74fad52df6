"""The process-kill checkpoint's machinery. The cases a student reads are in ``checkpoints/``;
everything they stand on is here:

- ``cases``: the case list, stated once (numbers and names);
- ``runner``: the command line, a sandbox per case, the evidence file;
- ``shop``: one case's shop file, supplier process and worker child;
- ``checks``: the failed check that says what differs, the refusals a stale holder must get;
- ``holder``: the sandboxed worker child;
- ``judge``: the trusted verdict, read from the files each case kept;
- ``demo``: ``make demo``.
"""
