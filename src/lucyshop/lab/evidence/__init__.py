"""Receipts: the one receipt engine (provenance, a durable write, recompute-and-compare), the
kit's statistics, and make test's time."""
