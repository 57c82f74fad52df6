"""What ``make check`` loads into each pytest child it starts (``-p``), the grader's machinery,
not tests: ``chapter``, the chapter file a run is about (``--impl``) and the sandbox that runs
it, which ``tests/conftest.py`` loads for every other run too; ``collect``, which writes every
test's outcome where the check reads it."""
