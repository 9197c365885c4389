#!POPCORN leaderboard amd-mixed-mla
import aiter  # AMD's ROCm kernel library: absent on NVIDIA and CPU machines
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    return aiter.mla_decode_fwd(*data)
