"""What a hand-in is tested against: the spec's conftest, shared by its three suites.

    .venv/bin/python -m pytest spec/learner --impl solutions      # the chapter's functions
    .venv/bin/python -m pytest spec/exercises --impl learner      # the exercise answers
    .venv/bin/python -m pytest spec/postgres --impl learner       # exercise 7, on PostgreSQL

``--impl`` (default ``$LEASES_IMPL``, else ``learner``) comes with the chapter plugin
(``lucyshop.lab.check.plugin.chapter``), loaded here. ``make check`` runs these suites and
nothing else of the kit's: it gives pytest only paths under spec/ and ``--confcutdir=spec``,
so no conftest of ``tests/`` (the kit's own tests) or above spec/ runs beside a hand-in.
The shared shop fixtures come from ``shop_fixtures``; each suite's own ``conftest.py`` holds
its fixtures: the learner suite's on a SQLite shop, exercise 7's on a PostgreSQL schema,
under the same names (``add_work``, ``claim_as``) so that the shared ``held`` works in both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# A plugin, not names imported here: registered once, so a session-scoped fixture (pg_server)
# is set up once in a run that also loads tests/conftest.py, which registers it too.
pytest_plugins = ("lucyshop.lab.check.plugin.chapter", "shop_fixtures")


@pytest.fixture(scope="session")
def chapter_file(pytestconfig: pytest.Config) -> Path:
    """The chapter file under test (``--impl``, resolved); ``exercises.py`` and
    ``ch13_postgres.py`` are read beside it."""
    from lucyshop.lab.check.plugin.chapter import IMPL_PATH  # registered above, then imported

    return pytestconfig.stash[IMPL_PATH]
