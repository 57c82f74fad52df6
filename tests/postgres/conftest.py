"""The kit's own PostgreSQL tests (the checkpoint's PostgreSQL cases, the embedded server,
the clock-skew trials): one server for the whole run, the spec's (``shop_fixtures.pg_server``).
Exercise 7's suite, which tests a hand-in, is ``spec/postgres``."""

from __future__ import annotations

from shop_fixtures import pg_server  # noqa: F401
