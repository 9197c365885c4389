"""triton_mxfp4.py's gfx950 path (q.K^T through tl.dot_scaled on the packed keys, an fp8 query):
chosen on MI355X only, and correct where it can run here, in Triton's CPU interpreter. Its
compiled form for gfx950 (scaled MFMA, no spills) is checked in tests/test_crosscompile.py."""

import os
import subprocess
import sys
import types

import pytest
import torch

from conftest import ROOT
from harness.worker.loop import load_module

SUBMISSION = ROOT / "submissions" / "triton_mxfp4.py"


def _interpreted(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    """`python argv...` in a fresh process under Triton's interpreter (whether Triton interprets is
    fixed when a kernel is defined, so it cannot be switched on in this process)."""
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env={**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""})


@pytest.mark.parametrize("hip, arch, setting, chosen", [
    ("7.0", "gfx950:sramecc+:xnack-", "gfx950", True),
    ("7.0", "gfx942:sramecc+:xnack-", "gfx950", False),
    (None, None, "gfx950", False),              # NVIDIA: no gcnArchName at all
    ("7.0", "gfx950:sramecc+:xnack-", "none", False),
    (None, None, "all", True),
])
def test_the_path_is_chosen_on_gfx950_only(monkeypatch, hip, arch, setting, chosen):
    """The GPU launch plan (device properties stood in for, workspaces on the meta device) takes the
    path on gfx950, not on gfx942 or NVIDIA, unless QK_DOT_SCALED says otherwise."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.version, "hip", hip)
    props = types.SimpleNamespace(multi_processor_count=256, **({"gcnArchName": arch} if arch else {}))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: props)
    module = load_module(SUBMISSION, "plan_dot_scaled_mxfp4")
    module.QK_DOT_SCALED = setting
    plan = module._make_plan(4, 4, 4 * 1024, torch.device("meta"))
    assert plan["qk_scaled"] is chosen
    assert ("matrix_instr_nonkdim" in plan["options"]) == bool(hip)


_E4M3_CHECK = """
import sys
import torch
import triton
import triton.language as tl
from harness.worker.loop import load_module

sub = load_module(sys.argv[1], "e4m3_mxfp4")


@triton.jit
def _quantize(x_ptr, scale_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, sub._to_e4m3(tl.load(x_ptr + offs), tl.load(scale_ptr)).to(tl.float32))


codes = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
grid = codes[codes.isfinite()].unique()
g = torch.Generator().manual_seed(0)
spread = torch.randn(8192, generator=g) * torch.exp2(torch.randint(-14, 9, (8192,), generator=g).float())
x = torch.cat([grid, (grid[1:] + grid[:-1]) / 2, spread, torch.tensor([449.0, -1e4, 3e-9])])
x = torch.cat([x, torch.zeros(16384 - x.numel())])
for scale in (1.0, 0.37):
    out = torch.empty_like(x)
    _quantize[(1,)](x, torch.tensor([scale]), out, x.numel())
    expected = (x / scale).clamp(-448, 448).to(torch.float8_e4m3fn).float()
    print(scale, "mismatches:", int((out != expected).sum()))
"""


def test_the_query_is_rounded_to_e4m3_as_the_reference_rounds_it():
    """`_to_e4m3` (the path's fp8 query) equals torch's fp32 -> float8_e4m3fn rounding of x / scale
    on every e4m3 value, every tie between neighbours (ties to even), subnormals, values past 448
    and random values over 23 binades, in the interpreter: Triton 3.9's own fp32 -> fp8 conversion
    there does not carry a rounding into the exponent (126.5 -> 64), which `_to_e4m3` works around."""
    run = _interpreted(["-c", _E4M3_CHECK, str(SUBMISSION)], timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["1.0", "mismatches:", "0", "0.37", "mismatches:", "0"], run.stdout


@pytest.mark.slow
def test_the_path_matches_the_fp8_query_reference_in_the_interpreter():
    """lab/mxfp4_dot_scaled_check.py under the interpreter: the path forced on, every small test
    case as planned and again cut into split-K chunks, each output within the strict check of the
    kv=mxfp4,q=fp8 reference (the same tool checks it on a GPU, where NVIDIA emulates dot_scaled)."""
    run = _interpreted([str(ROOT / "lab" / "mxfp4_dot_scaled_check.py")], timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert ": PASS, 8 of 8 runs match kv=mxfp4,q=fp8" in run.stdout, run.stdout
