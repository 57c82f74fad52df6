"""Gradescope: the autograder zip, its results.json, and the proof on a bare image."""
