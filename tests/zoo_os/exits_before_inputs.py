"""Tries: make the parent hold every case's input memory: say ready, then exit before the inputs
arrive, so the parent's send of them fails; the descriptors it made for them were closed only after
a send that worked.
Must get: a crash reported for this file; the parent holds no more descriptors after it than before."""
import os
import sys

if len(sys.argv) >= 5 and sys.argv[1].isdigit():  # inside the worker: say ready, then leave
    import json
    import struct

    body = json.dumps({"op": "ready"}).encode()
    os.write(int(sys.argv[1]), struct.pack("!I", len(body)) + body)
    os._exit(0)


def custom_kernel(data):
    raise RuntimeError("never called")
