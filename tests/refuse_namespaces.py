"""Run a command as a container with a default seccomp profile would: no new namespaces.

    python tests/refuse_namespaces.py make demo

Docker's default profile refuses ``unshare`` and ``clone`` with namespace flags to a process
without ``CAP_SYS_ADMIN``, and answers ``clone3`` with ENOSYS (so that the C library falls
back to ``clone``, whose flags a filter can read). This installs the same refusal, with a real
seccomp filter that every process the command starts inherits, so that bubblewrap, the
system's and the kit's, fails to start exactly as it does there, and the kit must fall back
to its unprivileged-user mode. Linux on x86_64 or aarch64; root keeps its other powers.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

# Per machine: the audit arch and the numbers of unshare, clone and clone3.
SYSCALLS = {"x86_64": (0xC000003E, 272, 56, 435), "aarch64": (0xC00000B7, 97, 220, 435)}
CLONE_NEW_ANY = 0x7E020000  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
EPERM, ENOSYS = 1, 38
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
LD_W_ABS, JEQ_K, JSET_K, RET_K = 0x20, 0x15, 0x45, 0x06
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The classic BPF filter, as (code, jump if true, jump if false, k) instructions."""
    arch, unshare, clone, clone3 = SYSCALLS[machine]
    return [
        (LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (JEQ_K, 1, 0, arch),
        (RET_K, 0, 0, RET_ALLOW),  # another arch's call: not ours to refuse
        (LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (JEQ_K, 0, 1, clone3),
        (RET_K, 0, 0, RET_ERRNO | ENOSYS),
        (JEQ_K, 1, 0, unshare),
        (JEQ_K, 0, 3, clone),
        (LD_W_ABS, 0, 0, 16),  # the low half of args[0]: the flags of unshare and clone
        (JSET_K, 0, 1, CLONE_NEW_ANY),
        (RET_K, 0, 0, RET_ERRNO | EPERM),
        (RET_K, 0, 0, RET_ALLOW),
    ]


def refuse_namespaces() -> None:
    """Install the filter on this process (and so on everything it starts)."""
    code = b"".join(struct.pack("HBBI", *op) for op in program(platform.machine()))
    buffer = ctypes.create_string_buffer(code)

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    fprog = Fprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    # Root may install a filter as it is (a container's root has no_new_privs unset, too);
    # anyone else must first give up gaining privileges through exec.
    if os.geteuid() != 0 and libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    refuse_namespaces()
    os.execvp(sys.argv[1], sys.argv[1:])
