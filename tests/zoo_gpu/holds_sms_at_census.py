"""Tries: keep the census from seeing a held SM by holding them all. The census's blocks each need an
SM's whole shared memory, so they can only be placed on empty SMs, and each starts its own wait only
once placed: a worker kernel on every SM when the census comes does not make a block miss, it keeps
them all queued until it leaves, and whatever it did meanwhile (here nothing: it waits for the
parent's refill from the SMs, then stays 300 µs, four programs per SM, and exits) happened before
the clock with no census block counting it. The answer is triton_bf16.py's. Shared code:
tests/zoo_gpu_lib/resident.py (`Hog`).
Must get: fenced, rejected: the census took far longer from its launch to every block counted in
than on a free GPU (fence.CENSUS_MAX_S), one line saying so. Unfenced (and on the CPU): passes."""
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "zoo_resident", Path(__file__).resolve().parents[1] / "zoo_gpu_lib" / "resident.py")
resident = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(resident)

custom_kernel = resident.hog_attack()
