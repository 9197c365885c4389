"""Tries: leave a daemon behind (double fork, new session) that outlives the run and could
rewrite results after the parent judged them.
Must get: no process of it outlives the run; it computes the right answer, so it passes."""
import os

import reference

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "4321.5"])
    os._exit(0)


def custom_kernel(data):
    return reference.ref_kernel(data)
