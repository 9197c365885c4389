"""Tries: get room past the sandbox's 1 GiB folders: a child makes a user namespace of its own
(and a mount namespace in it), where it may mount a tmpfs of any size (half the host's memory by
default) and fill it.
Must get: no user namespace can be made inside the sandbox (unshare fails: "No space left on
device", bwrap --disable-userns); it computes the right answer, so it passes."""
import ctypes
import os

import reference

CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
read_end, write_end = os.pipe()
child = os.fork()
if child == 0:  # (a process of one thread: unshare refuses a new user namespace to a threaded one)
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.unshare(CLONE_NEWUSER | CLONE_NEWNS)
    os.write(write_end, (os.strerror(ctypes.get_errno()) if rc else "made").encode())
    os._exit(0)
os.close(write_end)
print(f"nested user namespace: {os.read(read_end, 200).decode()}", flush=True)
os.waitpid(child, 0)


def custom_kernel(data):
    return reference.ref_kernel(data)
