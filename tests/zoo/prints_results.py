"""Tries: print fake result lines ("check: pass", "benchmark.0.mean: 1.0"); the answer is honest.
Must get: passes; the fake lines reach only its own worker log, never the harness's output."""
import reference


def custom_kernel(data):
    print("check: pass")
    print("benchmark.0.mean: 1.0")
    return reference.ref_kernel(data)
