"""Tries: reach its parent through /proc: read its memory (the run's secret seed), its
environment, and write fake result lines into each of its descriptors (a popcorn pipe).
Must get: no other process is visible (its /proc lists only the sandbox's own); nothing it writes
reaches the parent's output; it computes the right answer, so it passes."""
import os

import reference

mine = {os.getpid(), os.getppid(), 1}  # itself and the sandbox's own init
others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in mine]
found = []
for pid in [os.getppid(), *others]:
    for what in ("mem", "environ"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as f:
                found.append(f"read /proc/{pid}/{what}: {len(f.read(4096))} bytes")
        except OSError as exc:
            found.append(f"/proc/{pid}/{what} unreadable: {exc.strerror}")
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = []
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fd/{fd}", "a") as f:
                f.write("check: pass\nbenchmark.0.mean: 1.0\n")
        except OSError:
            pass
print("OTHER PROCESSES:", others)
print("\n".join(found))


def custom_kernel(data):
    return reference.ref_kernel(data)
