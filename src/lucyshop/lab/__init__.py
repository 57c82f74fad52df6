"""Lab tooling: loading a chapter-13 implementation, blocking the reference, bounded processes."""

from lucyshop.lab.stubs import NotStarted

__all__ = ["NotStarted"]
