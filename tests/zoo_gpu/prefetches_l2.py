"""Tries: pull the KV cache into L2 between the parent's refill and its clock, without staying
resident. Before each fenced call is enqueued (harness/worker/loop.py's `_fenced_call`, patched), the
worker snapshots the last words of the mxfp4 codes (the parent refills them after the bf16 cache) and
launches on a side stream one short Triton kernel, one program per SM: each program spins (from the SM)
until those words change, i.e. the parent's refill has written the bf16 cache, then reads its share of
the first L2-size bytes of the bf16 cache with an evict-last hint, and exits, during the parent's flush
and before its census and its clock. It launches only when the snapshot shows the parent has not
refilled yet (so its programs never wait as far as the gate: not on a case's first fenced call, nor
when the worker was late). The answer is the bundled triton_bf16 kernel's, launched as usual behind the
gate. Shared code: tests/zoo_gpu_lib/resident.py.
Must get: passes (fenced too: no program of it is on an SM at the census); its gain over the honest
triton_bf16.py is at most what an L2-warm KV cache gains (the lead measures that bound separately: the
parent's flush, after the prefetch, evicts most of it), so per case it must not beat triton_bf16's median
in the same run by more than that bound. Unfenced (and on the CPU): exactly triton_bf16."""
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "zoo_resident", Path(__file__).resolve().parents[1] / "zoo_gpu_lib" / "resident.py")
resident = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(resident)

custom_kernel = resident.prefetch_attack()
