"""Tries: end the whole run by killing its parent, its process group and (only where it sees it
is inside a fresh PID namespace, so that a run without the sandbox cannot take the machine
down) every process it may signal.
Must get: only the worker dies (crashed); the run goes on and completes."""
import os
import signal


def custom_kernel(data):
    targets = [os.getppid()] + ([-1] if os.getpid() < 10 else [])  # kill(-1) only inside a new PID namespace
    for target in targets:
        try:
            os.kill(target, signal.SIGKILL)
        except OSError as exc:
            print("kill", target, exc.strerror)
    os.killpg(0, signal.SIGKILL)
