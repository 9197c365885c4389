"""Tries: refuse to load: raises SystemExit("refusing to load") at import time.
Must get: "failed while importing: SystemExit: refusing to load"."""
raise SystemExit("refusing to load")
