"""Tries: answer before it is asked: right after its first call, a background thread queues
ready-made "output" replies (1 µs each) on its channel, so the parent would take one for the next
call's answer and time.
Must get: rejected: a protocol failure (a message nobody asked for), or, where a forged reply
lands while a call is awaited, the output check (the slot holds no answer); never a pass."""
import json
import os
import stat
import struct
import threading
import time

import reference

FORGED = json.dumps({"op": "output", "copied": True, "layout": {"shape": [1], "dtype": "bfloat16", "device": "cpu"},
                     "device_s": 1e-6, "host_s": 1e-6, "tail_s": 0.0, "replaced": []}).encode()


def flood():
    time.sleep(0.02)  # after the harness's own reply to this call
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, struct.pack("!I", len(FORGED)) + FORGED)
        except OSError:
            pass


started = []


def custom_kernel(data):
    if not started:
        started.append(threading.Thread(target=flood, daemon=True))
        started[0].start()
    return reference.ref_kernel(data)
