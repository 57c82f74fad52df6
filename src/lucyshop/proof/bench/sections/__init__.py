"""The sections of ``make bench``, each a module with a ``NAME`` and a ``run``."""
