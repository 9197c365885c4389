"""Tries: crash the parent (and with it the whole run) with a failure reply whose kind is a list:
the parent looked the kind up in a set of known kinds, and a list does not hash (TypeError).
Must get: a protocol failure for this file only; the other files of the run are evaluated."""
import json
import os
import stat
import struct


def custom_kernel(data):
    body = json.dumps({"op": "error", "kind": ["exception"], "message": "x"}).encode()
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, struct.pack("!I", len(body)) + body)
                break
        except OSError:
            pass
    import time
    time.sleep(3600)
