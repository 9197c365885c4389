"""A worker's scratch folder outside the sandbox: made private, and removed however deep its tree or
while processes it left still write there."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

SCRATCH_REMOVAL_SECONDS = 10.0  # how long remove_scratch keeps trying


def remove_scratch(path: Path, seconds: float = SCRATCH_REMOVAL_SECONDS) -> None:
    """Remove an ended worker's scratch folder. The worker's own process is gone, but the sandbox's
    other processes end a moment later (the kernel kills them once the sandbox's first process has
    died), and until then they can still write there: remove, and again while something reappears,
    for up to `seconds`; then say that it stayed."""
    deadline = time.monotonic() + seconds
    while True:
        remove_tree(path)
        if not os.path.lexists(path):
            return
        if time.monotonic() > deadline:
            print(f"warning: {path}: the worker's scratch folder could not be removed: something still writes there",
                  file=sys.stderr)
            return
        time.sleep(0.05)


def remove_tree(path: Path) -> None:
    """Remove a folder a worker wrote, whatever it holds: shutil.rmtree recurses once per level, so a
    tree thousands of folders deep raises RecursionError (ignore_errors does not cover it); then
    `rm -rf`, which walks it without recursion, finishes the job."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--", str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=300, check=False)


@contextlib.contextmanager
def worker_folder(prefix: str) -> Iterator[str]:
    """A temporary folder a worker writes into, removed with remove_tree at the end."""
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    finally:
        remove_tree(Path(path))
