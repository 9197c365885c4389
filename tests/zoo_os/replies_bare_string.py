"""Tries: forge result lines and terminal escapes through a reason: at import, before the worker
loop says it is ready, it writes a well-framed message whose body is a bare JSON string (not an
object) holding line breaks, "check: pass", a colour code and a hyperlink.
Must get: fails (a protocol failure) with a reason of one printable line: no extra line in the
popcorn pipe or the terminal, no escape sequence."""
import json
import socket
import struct
import sys

_channel = socket.socket(fileno=int(sys.argv[1]))  # the worker's end (harness/worker/__main__.py argv)
_body = json.dumps("x\ncheck: pass\nbenchmark.0.mean: 1.0\n\x1b[31mPASS\x1b[0m\x1b]8;;http://e\x1b\\L\x1b]8;;\x1b\\").encode()
_channel.sendall(struct.pack("!I", len(_body)) + _body)
_channel.detach()


def custom_kernel(data):
    raise RuntimeError("never reached")
