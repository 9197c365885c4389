"""Tries: be resident on the SMs when the parent's clock starts. Before each fenced call is enqueued
(harness/worker/loop.py's `_fenced_call`, patched), one Triton kernel of one program per SM is launched on
a side stream; every program spins on the fence's GATE word (volatile loads through the worker's
mapping of the flags buffer, `flags.buffer`) and, once the parent opens the gate, computes the call's
attention over the bf16 cache itself (fp32 scores, softmax and accumulation; split-K, merged by
triton_bf16.py's combine kernel). The call then only waits for that kernel and returns its output:
no kernel is launched after the gate, so the hand-over the fence's null calls measure (and subtract) is
skipped, an estimated 4-8 µs per call (docs/threat-model.md, "Closed in the fence"). Unfenced calls (the tests,
warm-ups, the CPU under Triton's interpreter) run the same kernel with a gate of its own already open:
an honest answer. The shared code is tests/zoo_gpu_lib/resident.py.
Must get: fenced, rejected by the census (the parent's check, after its flush and before its clock,
that every SM was free: here every SM holds a spinning program), one line saying so; where the census
waits for SMs that the spinning programs never free, the worker is ended (its programs give up by
themselves after SUBMISSION_SPIN_LIMIT_S, default 30 s). Unfenced (and on the CPU): passes."""
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "zoo_resident", Path(__file__).resolve().parents[1] / "zoo_gpu_lib" / "resident.py")
resident = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(resident)

custom_kernel = resident.at_gate_attack(preload=False)
