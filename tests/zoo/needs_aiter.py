#!POPCORN leaderboard amd-mixed-mla
"""Tries: import aiter, AMD's ROCm kernel library, absent on NVIDIA and CPU machines.
Must get: the import failure with the hint "aiter is an AMD ROCm package; this machine does not have it"."""
import aiter  # AMD's ROCm kernel library: absent on NVIDIA and CPU machines
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    return aiter.mla_decode_fwd(*data)
