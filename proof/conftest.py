"""The proof's own tests (``proof/``): the session plugins every suite of the kit loads, so that
``pytest proof`` runs on its own as well as inside ``make test`` (where ``tests/conftest.py``
loads the same ones: a plugin is registered once).

The code they test is ``lucyshop.proof`` (bench, soak, test-time, the Gradescope image proof),
with the query plan of the reference's ``claim`` that the bench's queue figures rest on; the
receipts it writes are in ``proof/receipts/``.
"""

pytest_plugins = ("lucyshop.lab.check.plugin.chapter", "leftovers", "shop_fixtures")
