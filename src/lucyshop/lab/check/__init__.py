"""``make check`` (``python -m lucyshop.lab.check``): each chapter function's row, the checkpoint
and the exercises, with the guard around the student's code and the pytest plugin it reads."""
