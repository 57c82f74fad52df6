"""Exercise 7 in the sandbox: the student's ``ch13_postgres.py`` in a worker that reaches a
PostgreSQL server only through a relay, as a role of its own.

- ``box``: the worker and its relay (``pg_sandbox``, ``PgSandbox``), and our connection
  paired with the worker's (``paired``).

What the trusted side does inside that worker (its own connection, its clock, a race of
claims) runs in there, so it lives with the rest of the inside: ``sandbox.inside.pg_probes``.

A room of its own because only exercise 7 needs it (and psycopg); the chapter's SQLite
tests never import it.
"""
