"""Hostile: choose when the injected rival comes (appended to the reference with both of the
kit's "holder check in its own transaction" mutants applied, ``observe`` and ``finish``).

At import, in the worker, the file rewrites what the trusted side uses in there to inject a
rival between a holder check and its write:

- ``lucyshop.lab.sandbox.inside.shop_probes.watch`` (where the kit once timed the rival from a
  trace callback on the student's connection): the rival is asked only while the file's own
  transaction holds the write lock, so it is asked, it never gets in, and a test that only
  counted that it was asked reads "nothing came between";
- ``lucyshop.lab.sandbox.inside.shop_probes.Connection`` (a connection whose statements the
  trusted side executes): each statement is sent inside a transaction of its own making, opened
  before it and closed after, so that no statement of the file's runs outside one.

Either way the two mutants write a stale row whenever a takeover really lands between their
two transactions; the rows of ``observe`` and ``finish`` must be FAILING.
"""

PARAMS = {}  # the test writes what this file is told here

import importlib as _importlib
import sqlite3 as _sqlite3


def _watch_only_under_the_lock(connection, rival):
    def statement(sql):
        if connection.in_transaction:  # the write lock is ours: the rival cannot win now
            rival.moment(sql[:200])

    connection.set_trace_callback(statement)


def _swap_the_probe():
    try:
        probes = _importlib.import_module("lucyshop.lab.sandbox.inside.shop_probes")
    except ImportError:
        return
    probes.watch = _watch_only_under_the_lock
    probes.unwatch = lambda connection: connection.set_trace_callback(None)


def _swap_the_served_connection():
    try:
        served = _importlib.import_module("lucyshop.lab.sandbox.inside.shop_probes")
    except ImportError:
        return
    plain = served.Connection._run

    def wrapped(self, sql, parameters):
        word = sql.strip().split(None, 1)[0].upper() if sql.strip() else ""
        if word in ("BEGIN", "COMMIT", "ROLLBACK", "END") or self.in_transaction:
            return plain(self, sql, parameters)
        plain(self, "BEGIN IMMEDIATE", ())
        try:
            answer = plain(self, sql, parameters)
        finally:
            plain(self, "COMMIT", ())
        self._in_transaction = False
        return answer

    served.Connection._run = wrapped


_swap_the_probe()
_swap_the_served_connection()
_sqlite3.enable_callback_tracebacks(False)
