"""Tries: find the secret seed in the environment, the command line and its parent's files.
Must get: passes (the answer is honest), and its log holds no seed: neither the run's secret nor any
case seed (under the popcorn protocol: no POPCORN variable, no POPCORN_SEED value)."""
import os
import sys

import reference


def custom_kernel(data):
    print("env:", sorted(os.environ.items()))
    print("argv:", sys.argv)
    for path in ("/proc/self/cmdline", "/proc/self/environ", f"/proc/{os.getppid()}/environ",
                 f"/proc/{os.getppid()}/cmdline"):
        try:
            with open(path, "rb") as f:
                print(path, f.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError as exc:
            print(path, "unreadable:", exc)
    return reference.ref_kernel(data)
