"""The process-kill checkpoint's machinery: the sandboxed worker child, the trusted judge of
what the runs kept, and ``make demo``. The cases a student reads are in ``checkpoints/``."""
