"""Tries: the kernel's keyrings, which belong to the uid and not to any namespace the sandbox makes
(its uid is the operator's): read the operator's keys (link the operator's user keyring, listed in
/proc/keys, into a session keyring of its own, which makes its keys readable), plant a key in that
keyring, where it would outlive the run, and one in its own session keyring.
Must get: every keyring system call refused ("Operation not permitted": the sandbox's seccomp
filter), /proc/keys unreadable (/dev/null over it, on a nodev mount); no key is left; it computes the right answer, so it
passes."""
import ctypes
import os

import reference

SYS = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]  # add_key, keyctl
KEYCTL_JOIN, KEYCTL_LINK, KEYCTL_READ, SESSION = 1, 8, 11, -3
libc = ctypes.CDLL(None, use_errno=True)


def outcome(rc):
    return os.strerror(ctypes.get_errno()) if rc < 0 else "done"


payload = b"planted by a sandboxed submission"
try:  # the host's keys' names and serials
    listing = open("/proc/keys").read().splitlines()
    print("/proc/keys lines:", len(listing), flush=True)
except OSError as exc:
    listing = []
    print("/proc/keys:", exc.strerror, flush=True)
print("join:", outcome(libc.syscall(SYS[1], KEYCTL_JOIN, None)), flush=True)
print("add_key session:", outcome(libc.syscall(SYS[0], b"user", b"mla-eval-planted", payload, len(payload),
                                               ctypes.c_long(SESSION))), flush=True)
for line in listing:
    fields = line.split()
    if len(fields) > 8 and fields[7] == "keyring" and fields[8].startswith("_uid."):
        ring = int(fields[0], 16)
        print("link user keyring:", outcome(libc.syscall(SYS[1], KEYCTL_LINK, ring, ctypes.c_long(SESSION))), flush=True)
        print("add_key user keyring:", outcome(libc.syscall(SYS[0], b"user", b"mla-eval-planted", payload,
                                                            len(payload), ring)), flush=True)
        buf = ctypes.create_string_buffer(4096)
        print("read user keyring:", outcome(libc.syscall(SYS[1], KEYCTL_READ, ring, buf, 4096)), flush=True)


def custom_kernel(data):
    return reference.ref_kernel(data)
