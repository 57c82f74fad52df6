"""Lucy's shop agent: the runtime supplied by earlier chapters (students read it, never edit it)."""

import os

# The environment variable that names the chapter file (learner, solutions or a path): read by
# chosen_impl alone, set for every child that must load the same.
IMPL_ENV = "LEASES_IMPL"


def chosen_impl(
    option: str | os.PathLike[str] | None = None, *, otherwise: str | os.PathLike[str] = "learner"
) -> str | os.PathLike[str]:
    """Which chapter file is meant: ``--impl`` when given, else ``$LEASES_IMPL``, else
    ``otherwise`` (the learner's file). The one statement of that rule, for the status report
    here and for the whole lab (``lucyshop.lab.loader``)."""
    return option or os.environ.get(IMPL_ENV) or otherwise
