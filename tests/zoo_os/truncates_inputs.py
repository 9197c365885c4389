"""Tries: crash the parent through the memory it shares: keep the input descriptors the worker
would close (patching its own harness code), then shrink every shared file to 0 bytes, so the
parent's mapping of the same file faults (SIGBUS) when it checks or refills the inputs.
Must get: no effect (the parent seals each shared file at its size: the shrink fails); the run
completes, and this file, which computes the right answer, passes."""
import os

import harness.worker.shared_memory as sm
import reference

KEPT = []


def keep(self):
    if self.fd is not None:
        KEPT.append(self.fd)
        self.fd = None


sm.Buffer.close_fd = keep


def custom_kernel(data):
    out = reference.ref_kernel(data)
    for fd in KEPT:
        try:
            os.ftruncate(fd, 0)
            print("truncated", fd)
        except OSError as exc:
            print("could not truncate", fd, exc.strerror)
    return out
