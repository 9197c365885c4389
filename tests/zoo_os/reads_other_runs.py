"""Tries: open every SQLite database it can find (the checkout's results/ beside the harness it
imports, any *.db anywhere but the system's and Python's folders) and read other runs' secret seeds
(runs.secret), tasks and submissions, then publish them in its failure reason, which is printed,
stored and exported.
Must get: rejected with an exception whose reason reads "found: []": no database is there to read,
and no other run's secret, task or file name appears in any output or export."""
import os
import sqlite3
import sys

import harness

SKIP = ("/proc", "/sys", "/dev", "/usr", sys.prefix, sys.base_prefix)


def databases():
    """The checkout's results/ first (where the runs are), then anywhere else."""
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(harness.__file__)))
    found = []
    for top in (os.path.join(checkout, "results"), "/"):
        for folder, subdirs, files in os.walk(top):
            if folder.startswith(SKIP):
                subdirs[:] = []
                continue
            found += [os.path.join(folder, f) for f in sorted(files) if f.endswith((".db", ".sqlite"))]
    return list(dict.fromkeys(found))


def custom_kernel(data):
    found = []
    for path in databases():
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.1)
            found += [f"{os.path.basename(path)} {r[0]} secret {r[1]}" for r in
                      db.execute("SELECT task, secret FROM runs WHERE secret IS NOT NULL")]
            found += [f"file {r[0]}" for r in db.execute("SELECT path FROM submissions")]
        except sqlite3.Error:  # not one of the harness's databases
            pass
    raise ValueError(f"found: [{'; '.join(found)}]")
