"""Lucy's shop agent: the runtime supplied by earlier chapters (students read it, never edit it)."""

# The environment variable that names the chapter file (learner, solutions or a path): read by
# the status report here and by the lab's loader, set for every child that must load the same.
IMPL_ENV = "LEASES_IMPL"
