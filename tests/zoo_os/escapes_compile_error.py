"""Tries: under `--mode compile`, write terminal control sequences to standard error and exit, so
that the one line the harness prints about the failed capture (the end of that output) clears the
screen, retitles the window and draws a green "compiled ... check: pass" row.
Must get: the failure line, with every control character replaced (no escape reaches the terminal)."""
import os

os.write(2, b"\x1b[2J\x1b[H\x1b]0;owned\x07\x1b[32mgfx950  compiled  check: pass\x1b[0m  \x1b[8mhidden\n")
os._exit(3)


def custom_kernel(data):
    return None
