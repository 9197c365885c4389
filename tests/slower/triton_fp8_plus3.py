"""Is: submissions/triton_fp8.py with 3% more GPU work per call (tests/slower/_extra_work.py: a spin
kernel after it on the call's stream, calibrated per shape so the whole call takes 1.03x the
original's time; at the smallest cases one more kernel's dispatch is more than 3% of the call, so
there it is slower by that).
Must get: passes every case, as the original; ranks strictly behind triton_fp8.py in every run on the
H200 (issue 41: ties stay tight), its geomean about 3% above the original's. Run it as a standalone
file (lab/standalone.py: the sandbox shows a worker only its own file)."""
import importlib.util
from pathlib import Path

FRACTION = 0.03

_spec = importlib.util.spec_from_file_location("slower_extra_work", Path(__file__).resolve().parent / "_extra_work.py")
_extra = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_extra)

custom_kernel = _extra.slower(Path(__file__).resolve().parents[2] / "submissions" / "triton_fp8.py", FRACTION,
                              "triton_fp8_plus3")
