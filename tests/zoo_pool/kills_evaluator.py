"""Tries: kill the process that started its worker (the harness's evaluator) at import time.
Must get: unsandboxed, "evaluator process killed by SIGKILL while evaluating this submission",
and a fresh evaluator takes the slot for the rest (sandboxed, it cannot see its evaluator)."""
import os
import signal

os.kill(os.getppid(), signal.SIGKILL)


def custom_kernel(data):
    raise AssertionError("never reached")
