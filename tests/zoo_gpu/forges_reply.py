"""Tries: rewrite the reply on its way to the parent (the channel's send) so every call's device
time reads ten times smaller; the work itself is honest.
Must get: fenced, no effect: the reply's time is kept only as the worker's own figure beside the
parent's, which ranks. Unfenced: rejected by the profiler's audit."""
import reference
from harness.worker.channel import Channel

_send = Channel.send


def shrink(self, message, fds=()):
    if isinstance(message, dict) and "device_s" in message:
        message = {**message, "device_s": message["device_s"] / 10}
    return _send(self, message, fds)


Channel.send = shrink


def custom_kernel(data):
    return reference.ref_kernel(data)
