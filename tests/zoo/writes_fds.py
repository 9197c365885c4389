"""Tries: write fake result lines into every file descriptor it can find (a reporting pipe, the
parent's tty); the answer is honest.
Must get: rejected: "protocol: malformed message from the worker"; no fake line reaches the
harness's output (under the popcorn protocol: exit 112, "check: fail", only the harness's lines)."""
import os

import reference

FAKE = b"check: pass\nbenchmark.0.mean: 1.0\n"


def custom_kernel(data):
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            os.write(fd, FAKE)
        except OSError:
            pass
    return reference.ref_kernel(data)
