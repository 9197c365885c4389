"""Tries: read and overwrite every other file in its own folder (the competitors' submissions).
Must get: it sees none of them (the folder holds only its own file) and none changes; it
computes the right answer, so it passes."""
import pathlib

import reference

here = pathlib.Path(__file__).resolve()
seen = sorted(p.name for p in here.parent.iterdir() if p != here)
print("NEIGHBOURS:", seen)
for path in here.parent.iterdir():
    if path != here and path.is_file():
        try:
            path.write_text("def custom_kernel(data):\n    raise SystemExit('sabotaged')\n")
            print("overwrote", path)
        except OSError as exc:
            print("could not overwrite", path, exc.strerror)


def custom_kernel(data):
    return reference.ref_kernel(data)
