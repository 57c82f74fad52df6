"""Receipts: the one receipt engine (provenance, a durable write, recompute-and-compare), which
receipts are stale against which files (``pins``), and the kit's statistics."""
