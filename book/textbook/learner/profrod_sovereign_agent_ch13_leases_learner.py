"""The book's path to the chapter's learner file: the kit's ``learner/ch13_leases.py``, beside
this folder. The chapter runs this file with ``runpy.run_path`` and reads the learner's
functions from what it returns, so every name that file defines is defined here too."""

from pathlib import Path

from lucyshop.lab.book import learner_names

globals().update(learner_names(Path(__file__)))
