"""Receipts: the one receipt engine (provenance, a durable write, recompute-and-compare), which
receipts are stale against which files (``pins``), the kit's statistics, and make test's time."""
