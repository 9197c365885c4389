"""Kills the process that started its worker (the harness's evaluator) at import time."""
import os
import signal

os.kill(os.getppid(), signal.SIGKILL)


def custom_kernel(data):
    raise AssertionError("never reached")
