"""Who shares code with whom: fingerprints, ranked pairs, and their side-by-side page."""
