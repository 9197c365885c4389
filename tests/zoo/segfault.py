import ctypes


def custom_kernel(data):
    ctypes.string_at(0)  # read address 0: SIGSEGV
