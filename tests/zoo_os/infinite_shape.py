"""Tries: crash the parent with a reply whose output layout says shape = [Infinity] (Python's json
reads Infinity; int() of it raises OverflowError), by patching its own end of the channel.
Must get: a protocol failure for this submission only ("malformed message"); the parent goes on."""
import reference
from harness.worker.channel import Channel

_send = Channel.send


def send(self, msg, fds=()):
    if isinstance(msg, dict) and msg.get("op") == "output":
        msg = dict(msg, layout=dict(msg["layout"], shape=[float("inf")]))
    return _send(self, msg, fds)


Channel.send = send


def custom_kernel(data):
    return reference.ref_kernel(data)
