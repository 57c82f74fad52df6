"""Receipts and figures: the receipt engine, the kit's statistics, Part A's plots, make test's
time."""
