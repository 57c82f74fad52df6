"""The grader's pytest machinery, not tests: ``chapter``, the chapter file a run is about
(``--impl``) and the sandbox that runs it, which ``spec/conftest.py`` and ``tests/conftest.py``
load, each for its own tree; ``collect``, which ``make check`` loads into each pytest child it
starts (``-p``) and which writes every test's outcome where the check reads it."""
