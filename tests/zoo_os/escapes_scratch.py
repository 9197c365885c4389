"""Tries: leave files where later runs would find them: /tmp, /dev/shm, the home folder's Triton
cache (a poisoned compiled kernel for the next submission), the working folder.
Must get: nothing appears outside the worker's private scratch, which is removed after it; it
computes the right answer, so it passes."""
import os
import pathlib

import reference

for place in ("/tmp", "/dev/shm", "/root/.triton/cache", os.path.expanduser("~/.triton/cache"), os.getcwd(),
              "/var/tmp"):
    try:
        pathlib.Path(place).mkdir(parents=True, exist_ok=True)
        (pathlib.Path(place) / "mla-eval-escaped.txt").write_text("was here")
        print("wrote into", place)
    except OSError as exc:
        print("could not write into", place, exc.strerror)


def custom_kernel(data):
    return reference.ref_kernel(data)
