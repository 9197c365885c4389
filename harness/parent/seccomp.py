"""The sandbox's system-call filter (bwrap --seccomp): the kernel keyrings out of reach, and the
command line that carries the filter's descriptor to bwrap."""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import sys
from typing import Optional


# Kernel keyrings belong to the uid, not to any namespace the sandbox makes, and the worker's uid is the
# operator's: it could link the operator's user keyring into a session keyring of its own and read
# every key in it, add keys that outlive it, or fill the per-uid key quota. A seccomp filter (bwrap
# --seccomp) refuses the keyring system calls with EPERM, as Docker's default profile does, also through
# the 32-bit entry points. (architecture: its AUDIT_ARCH value and the numbers of add_key,
# request_key and keyctl, for the native ABI and the compat ABI that shares the machine.)
KEYRING_CALLS = {
    "x86_64": ((0xC000003E, (248, 249, 250, 0x40000000 + 248, 0x40000000 + 249, 0x40000000 + 250)),  # 64-bit, x32
               (0x40000003, (286, 287, 288))),                                                      # i386
    "aarch64": ((0xC00000B7, (217, 218, 219)), (0x40000028, (309, 310, 311))),                      # arm64, arm
}


KEYCTL = {machine: calls[0][1][2] for machine, calls in KEYRING_CALLS.items()}  # keyctl's native number
# (looked up once here: a child between fork and exec must not dlopen, another thread may hold its lock)
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_KEYCTL_HERE = KEYCTL.get(platform.machine()) if _LIBC is not None else None


def seccomp_program(machine: Optional[str] = None) -> Optional[bytes]:
    """The classic-BPF filter bwrap's --seccomp loads (struct sock_filter[]), or None where no
    table of system call numbers is known for this machine."""
    import struct

    table = KEYRING_CALLS.get(machine or platform.machine())
    if table is None:
        return None
    ld_abs, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    blocks = []
    for arch, numbers in table:  # seccomp_data: nr at offset 0, arch at 4
        blocks.append([(jeq, 0, len(numbers) + 2, arch), (ld_abs, 0, 0, 0)] +
                      [(jeq, None, 0, n) for n in numbers] + [(ret, 0, 0, allow)])
    program = [(ld_abs, 0, 0, 4)] + [insn for block in blocks for insn in block] + [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    deny_at = len(program) - 1
    return b"".join(struct.pack("=HBBI", code, deny_at - i - 1 if jt is None else jt, jf, k)
                    for i, (code, jt, jf, k) in enumerate(program))


class SandboxCommand(list):
    """bwrap's command line, and the descriptor its --seccomp reads the filter from (one per start:
    bwrap reads it to its end). Pass `fds` to the child (pass_fds) and `close()` once it started."""

    fds: tuple[int, ...] = ()

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = ()


def _seccomp_fd() -> Optional[int]:
    program = seccomp_program()
    if program is None:
        return None
    fd = os.memfd_create("mla-eval-seccomp", 0)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
