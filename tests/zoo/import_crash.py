raise SystemExit("refusing to load")
