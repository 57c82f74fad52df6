"""What the sandbox asks of the host it runs on: a bubblewrap that can make namespaces
(``bubblewrap``), a uid of each run's own where none can (``uids``), and a count of processes
and a memory limit on each whole sandbox, which the kernel enforces (``cgroups``). Nothing
here runs student code: ``jail`` does, with what these find."""


class CannotIsolate(RuntimeError):
    """The chosen isolation is not available here (one line says why)."""
