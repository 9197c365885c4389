"""Tries: fill the host's disk (where the results database and everyone's files live) through each
folder it may write: its working folder (/tmp/work: HOME, the Triton cache), /tmp and /dev/shm,
8 MiB files one after another until a write fails (at most 512 MiB per folder, so that a harness
without the bound does not take the test machine's disk).
Must get: every folder stops it at the sandbox's tmpfs size (harness/parent/launch.py TMPFS_LIMIT; the
write fails: no space left on device), nothing reaches the host's disks, and nothing is left when
the sandbox goes; it then removes its files and computes the right answer, so it passes."""
import os

import reference

CHUNK = b"x" * (8 << 20)
for folder in ("/tmp/work", "/tmp", "/dev/shm"):
    written, made, stopped = 0, [], "the 512 MiB cap"
    try:
        while written < (512 << 20):
            made.append(os.path.join(folder, f"fill{len(made)}"))
            with open(made[-1], "wb") as f:
                f.write(CHUNK)
            written += len(CHUNK)
    except OSError as exc:
        stopped = exc.strerror
    print(f"filled {folder} {written} bytes, stopped by: {stopped}", flush=True)
    for path in made:
        if os.path.exists(path):
            os.remove(path)


def custom_kernel(data):
    return reference.ref_kernel(data)
