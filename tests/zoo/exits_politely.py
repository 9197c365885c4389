"""Tries: a clean-looking exit, sys.exit(0), in the middle of a call.
Must get: rejected: "exception: SystemExit"."""
import sys


def custom_kernel(data):
    sys.exit(0)  # a clean-looking exit in the middle of a call
