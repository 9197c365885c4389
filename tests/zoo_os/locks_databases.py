"""Tries: find every SQLite database it can open (the checkout's results/ beside the harness it
imports, any *.db or *.sqlite anywhere but the system's and Python's folders, its parent's command
line) and hold SQLite's shared lock on each for as long as it runs, so that an honest run started
meanwhile, on the same database or another, fails with "database is locked".
Must get: passes (its answers are honest); it finds no database (its log: "locked: []"), and honest
runs started meanwhile on the same database and on another end with their normal verdicts."""
import os
import sqlite3
import sys
import time

import harness
import reference

HOLD_SECONDS = float(os.environ.get("SUBMISSION_HOLD_SECONDS", "1"))  # per call: it outlives the runs it blocks
SKIP = ("/proc", "/sys", "/dev", "/usr", sys.prefix, sys.base_prefix)


def databases():
    found = set()
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(harness.__file__)))
    for folder, subdirs, files in os.walk("/"):
        if folder.startswith(SKIP):
            subdirs[:] = []
            continue
        found |= {os.path.join(folder, f) for f in files if f.endswith((".db", ".sqlite", ".sqlite3"))}
    for folder, _, files in os.walk(os.path.join(checkout, "results")):
        found |= {os.path.join(folder, f) for f in files if f.endswith(".db")}
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            found |= {a.decode() for a in f.read().split(b"\0") if a.endswith(b".db")}
    except OSError:
        pass
    return sorted(found)


held = []
for path in databases():
    try:
        db = sqlite3.connect(path, timeout=0.1, check_same_thread=False)
        db.execute("BEGIN")
        db.execute("SELECT count(*) FROM sqlite_master").fetchall()  # SHARED, until the transaction ends
        held.append((path, db))
    except sqlite3.Error as exc:
        print("could not lock", path, exc)
print("locked:", [path for path, _ in held], flush=True)


def custom_kernel(data):
    time.sleep(HOLD_SECONDS)
    return reference.ref_kernel(data)
