"""Real services for tests and the lab: bounded child processes, the supplier, a PostgreSQL
server."""
