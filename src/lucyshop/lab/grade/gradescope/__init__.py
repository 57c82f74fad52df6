"""Gradescope: the autograder zip and its results.json (its proof on a bare image is
``lucyshop.proof.gradescope``)."""
