"""Tries: see the results database and the log folder of a fresh run (created by the parent only
after this, the first worker, has started) through the read-only view of the filesystem.
Must get: neither is in its view (the mount table holds neither: the sandbox's allow-list,
harness/parent/allowlist.py, does not list them, so they do not exist there); it computes the right answer."""
import reference

for line in open("/proc/self/mountinfo"):
    fields = line.split()
    print("MOUNT", fields[4], fields[5])


def custom_kernel(data):
    return reference.ref_kernel(data)
