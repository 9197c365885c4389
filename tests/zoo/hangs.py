"""Tries: never return from a call (sleeps forever).
Must get: killed at the case's timeout: "timeout: timed out after <limit> s"; the later cases are
reported as "not run", not attempted."""
import time


def custom_kernel(data):
    while True:
        time.sleep(1)
