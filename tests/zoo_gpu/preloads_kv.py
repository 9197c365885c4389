"""Tries: start the call's memory traffic before the parent's clock and finish it on chip. As
resident_at_gate.py (one program per SM launched on a side stream before each fenced call is enqueued,
spinning on the fence's GATE word from the SMs, the call's answer computed there once the gate opens),
but every program first waits, from the SMs, until the parent's refill has written the bf16 cache (the
last words of the mxfp4 codes, which the parent copies after it, differ from the worker's snapshot of
them taken before it enqueued the call), then loads the first
32-row tile of its first (sequence, split) item into registers during the rest of the refill and the
parent's L2 flush (the flush empties L2, not the SMs), and only then spins on GATE: at the gate it
reads q and computes, with that tile already on chip. At the small shapes one tile is most of a
program's share of the cache (4 x 1024: 32 splits of 32 rows per sequence), so most of the call's
reading happens before the clock (docs/threat-model.md, "Still open", (1)). Unfenced calls and the CPU run the
same kernel with a gate of its own already open: an honest answer. Shared code:
tests/zoo_gpu_lib/resident.py.
Must get: fenced, rejected by the census (the parent's check, after its flush and before its clock,
that every SM was free: every SM holds a program with its tile), one line saying so; where the census
waits for SMs that never free, the worker is ended (the programs give up by themselves after
SUBMISSION_SPIN_LIMIT_S, default 30 s). Unfenced (and on the CPU): passes."""
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "zoo_resident", Path(__file__).resolve().parents[1] / "zoo_gpu_lib" / "resident.py")
resident = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(resident)

custom_kernel = resident.at_gate_attack(preload=True)
