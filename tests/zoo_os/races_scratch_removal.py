"""Tries: leave files on the host: 16 forked processes keep creating files and folders in the
scratch folder (/tmp/work), then the worker breaks its channel's framing so that the parent kills
it and removes the scratch folder while the sandbox's other processes may still be writing.
Must get: fails (a protocol failure); no file of it is left on the host after the run."""
import os
import sys
import time

import reference


def _write_forever(i):
    n = 0
    while True:
        try:
            os.makedirs(f"/tmp/work/left/d{i}_{n}", exist_ok=True)
            with open(f"/tmp/work/left/f{i}_{n}", "w") as f:
                f.write("x")
        except OSError:
            pass
        n += 1


def custom_kernel(data):
    for i in range(16):
        if os.fork() == 0:
            _write_forever(i)
    time.sleep(0.5)
    os.write(int(sys.argv[1]), b"\x00\x00\x00\x05zzzzz")  # a frame the parent cannot read
    time.sleep(60)
    return reference.ref_kernel(data)
