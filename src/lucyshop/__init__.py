"""Lucy's shop agent: the runtime supplied by earlier chapters (students read it, never edit it)."""
