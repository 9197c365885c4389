"""Tries: read address 0 in a call, so its worker dies of SIGSEGV.
Must get: "crashed: worker process killed by SIGSEGV"; the other submissions are still evaluated."""
import ctypes


def custom_kernel(data):
    ctypes.string_at(0)  # read address 0: SIGSEGV
