"""Is: submissions/triton_fp8.py with 10% more GPU work per call (tests/slower/_extra_work.py: a spin
kernel after it on the call's stream, calibrated per shape so the whole call takes 1.10x the
original's time).
Must get: passes every case, as the original; "slower" on every case against triton_fp8.py on the H200
(issue 41: --compare of a run of the original and a run of this file at the same path, --baseline), its
geomean about 10% above the original's. Run it as a standalone file (lab/standalone.py: the sandbox
shows a worker only its own file)."""
import importlib.util
from pathlib import Path

FRACTION = 0.10

_spec = importlib.util.spec_from_file_location("slower_extra_work", Path(__file__).resolve().parent / "_extra_work.py")
_extra = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_extra)

custom_kernel = _extra.slower(Path(__file__).resolve().parents[2] / "submissions" / "triton_fp8.py", FRACTION,
                              "triton_fp8_plus10")
