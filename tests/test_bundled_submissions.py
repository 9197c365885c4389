"""Every bundled submission passes every small test case on the CPU (Triton kernels run in
Triton's interpreter), so CI exercises their real code paths."""

import pytest
from conftest import ROOT, TRITON_KERNELS, load_submission

from harness.config import RunContext
from harness.parent.engine import evaluate
from harness.config import RunConfig
from harness.task.problem import load_problem

pytestmark = pytest.mark.slow  # every bundled kernel in Triton's interpreter

# By name: a work-in-progress file someone drops into submissions/ is not a bundled submission.
SUBMISSIONS = ("torch_batched.py", "torch_loop.py", "triton_bf16.py", "triton_fp8.py", "triton_mxfp4.py")


@pytest.mark.parametrize("name", SUBMISSIONS)
def test_bundled_submission_passes(problem, cpu, tmp_path, name):
    ctx = RunContext(problem, cpu, RunConfig(small=True, logs=str(tmp_path)))
    result = evaluate(ROOT / "submissions" / name, ctx, "test")
    failures = [f"{c.name}: {c.reason}" for c in result.cases if not c.ok]
    assert result.ok, result.error or failures
    assert len(result.cases) == len(problem.spec.cases("test", small=True))


def test_each_triton_kernel_reads_only_its_own_format():
    from pathlib import Path

    from harness.parent.scan import declared_variant

    for fmt in ("bf16", "fp8", "mxfp4"):
        path = ROOT / "submissions" / f"triton_{fmt}.py"
        source = Path(path).read_text()
        others = [f for f in ("bf16", "fp8", "mxfp4") if f != fmt]
        assert declared_variant(path, ["bf16", "fp8", "mxfp4"]) == fmt
        assert not any(f'kv_data["{o}"]' in source or f"kv_data['{o}']" in source for o in others)


# (tests/competition/assumes_decode_shape.py fails this task on purpose: tests/test_competition_task.py)
COMPETITION = [ROOT / "tests" / "competition" / name for name in ("fp8_reference_style.py", "mxfp4_scales_style.py")]


@pytest.mark.parametrize("path", COMPETITION, ids=[p.name for p in COMPETITION])
def test_competition_style_files_run_unchanged(problem, cpu, tmp_path, path):
    """GPU MODE imports, #!POPCORN headers, config keys, kv_data["fp8"] / ["mxfp4"] as the AMD
    challenge laid them out: such files run here as they are. Their recipe (bf16 scores, and for fp8
    q8 * scale rounded to bf16) is outside task.yml's precision contract, so the default task fails
    them on precision alone (every case computed, no interface error) and says they pass the
    competition's own task, where they rank."""
    result = evaluate(path, RunContext(problem, cpu, RunConfig(small=True, logs=str(tmp_path))), "test")
    assert not result.error and result.cases, result.error
    assert all(c.ok or c.reason.startswith("output differs from the reference") for c in result.cases), \
        [c.reason for c in result.cases]
    assert result.companion.startswith("passes amd-mixed-mla-competition's"), result.companion
    competition = load_problem(ROOT / "tasks" / "competition" / "task.yml")
    ctx = RunContext(competition, cpu, RunConfig(small=True, logs=str(tmp_path / "competition")))
    result = evaluate(path, ctx, "test")
    assert result.ok, result.error or [c.reason for c in result.cases if not c.ok]
    assert all("kv=fp8,q=fp8" in c.reason for c in result.cases)  # (the competition's check has that path only)


@pytest.mark.parametrize("name", TRITON_KERNELS)
def test_launch_plan_fills_one_wave_on_a_gpu(problem, monkeypatch, name):
    """The GPU launch plan, computed here for an H200-like device (132 SMs; workspaces on the meta
    device): on every benchmark shape the split-K grid fits the program slots in one wave (a
    second, partial wave nearly doubled some shapes' time, BENCHMARKS.md session 3), and the
    grid covers every sequence."""
    import types

    import torch

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device=None: types.SimpleNamespace(multi_processor_count=132))
    module = load_submission(name, "plan")
    for case in problem.spec.cases("benchmark"):
        batch, q_len, kv_len = case.args["batchsize"], case.args["qseqlen"], case.args["kvseqlen"]
        plan = module._make_plan(batch, batch * q_len, batch * kv_len, torch.device("meta"))
        programs, splits = plan["grid"]
        slots = 132 * max(1, module.WARPS_PER_SM // plan["options"]["num_warps"])
        if name in GLUON_FILES:
            assert plan["sm90"] is None  # a meta device is no sm_90 GPU: the portable kernel
        assert programs == batch * plan["q_groups"] and splits == plan["splits"] >= 1
        assert programs * splits <= max(slots, programs), (case.args, plan["grid"], slots)
        assert plan["dot_dtype"] != module.tl.float32  # the GPU path, not the interpreter's


GLUON_FILES = ("triton_fp8.py", "triton_mxfp4.py")   # the files with an sm_90 Gluon kernel


@pytest.mark.parametrize("name", GLUON_FILES)
def test_gluon_path_is_chosen_only_on_sm90_with_a_measured_triton(monkeypatch, name):
    """The Gluon kernel is taken only on an NVIDIA sm_90 GPU, with a Triton version it was measured
    on (SM90_TRITON) and its knob on, never under the interpreter; any other GPU or Triton gets the
    portable kernel."""
    import torch

    module = load_submission(name, "sm90_choice")
    if module.gluon is None:
        pytest.skip("this Triton has no Gluon")
    cuda = torch.device("cuda")
    capability = {"value": (9, 0)}
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability["value"])
    monkeypatch.setattr(torch.version, "hip", None)
    here = tuple(module.triton.__version__.split(".")[:2])
    monkeypatch.setattr(module, "SM90_TRITON", (here,))
    monkeypatch.setattr(module, "SM90_GLUON", True)
    assert module._sm90_path(cuda, interpreted=False)
    assert not module._sm90_path(cuda, interpreted=True)
    assert not module._sm90_path(torch.device("cpu"), interpreted=False)
    for other in ((8, 0), (8, 9), (10, 0), (12, 0)):
        capability["value"] = other
        assert not module._sm90_path(cuda, interpreted=False), other
    capability["value"] = (9, 0)
    monkeypatch.setattr(module, "SM90_TRITON", (("0", "1"),))
    assert not module._sm90_path(cuda, interpreted=False)
    monkeypatch.setattr(module, "SM90_TRITON", (here,))
    monkeypatch.setattr(module, "SM90_GLUON", False)
    assert not module._sm90_path(cuda, interpreted=False)


@pytest.mark.parametrize("name", GLUON_FILES)
def test_gluon_plan_fills_one_wave_of_one_program_per_sm(problem, monkeypatch, name):
    """With the Gluon kernel chosen (as on an H200: 132 SMs), the benchmark shapes of one query
    row it is chosen for (the long ones; every one with SM90_SHORT_KV) get its launch (64-row tiles,
    one program per SM, its shared memory allows no more; two where the sequences alone fill the GPU
    and SM90_WIDE is on) and a split-K grid of at most one wave; the others keep the portable kernel."""
    import types

    import torch

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device=None: types.SimpleNamespace(multi_processor_count=132))
    module = load_submission(name, "sm90_plan")
    monkeypatch.setattr(module, "_sm90_path", lambda device, interpreted: True)
    chosen = 0
    for case in problem.spec.cases("benchmark"):
        batch, q_len, kv_len = case.args["batchsize"], case.args["qseqlen"], case.args["kvseqlen"]
        plan = module._make_plan(batch, batch * q_len, batch * kv_len, torch.device("meta"))
        programs, splits = plan["grid"]
        chosen_here = q_len == 1 and (kv_len >= module.LONG_KV or batch >= 132 or module.SM90_SHORT_KV)
        assert bool(plan["sm90"]) == chosen_here, case.args
        if chosen_here:
            chosen += 1
            wide = getattr(module, "SM90_WIDE", False) and batch >= 132   # (triton_mxfp4.py has no wide launch)
            assert plan["sm90"] is (module.SM90_WIDE_LAUNCH if wide else module.SM90_LAUNCH), case.args
            assert plan["block_n"] == 64
            slots = 132 * plan["sm90"]["programs_per_sm"]
            assert programs == batch and programs * splits <= max(slots, programs), (case.args, plan["grid"])
    assert chosen == (8 if module.SM90_SHORT_KV else 5)   # every shape, or the four 8k ones and 256 x 1k
    plan = module._make_plan(8, 32, 8 * 8192, torch.device("meta"))   # 4 query rows per sequence
    if plan["q_rows"] > 1:
        assert not plan["sm90"]   # (fp8) several rows per program: the portable kernel
    else:
        assert plan["sm90"] and plan["q_groups"] == 4   # (mxfp4) one program per query row


def test_bf16_plan_keeps_the_short_tile_only_for_a_small_cache(problem, monkeypatch):
    """triton_bf16.py on an H200 (132 SMs): the 32-row tile of LAUNCH[(1, False)] only where the
    programs read fewer than SHORT_TILE_ROWS_PER_SM cache rows per SM (4 x 1k); every other benchmark
    shape gets the long settings. Several query rows per program, and the interpreter, keep theirs."""
    import types

    import torch

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device=None: types.SimpleNamespace(multi_processor_count=132))
    module = load_submission("triton_bf16.py", "bf16_plan")
    short, long = module.LAUNCH[(1, False)], module.LAUNCH[(1, True)]
    for case in problem.spec.cases("benchmark"):
        batch, kv_len = case.args["batchsize"], case.args["kvseqlen"]
        plan = module._make_plan(batch, batch, batch * kv_len, torch.device("meta"))
        launch = short if batch * kv_len < module.SHORT_TILE_ROWS_PER_SM * 132 else long
        assert (batch, kv_len) != (4, 1024) or launch is short
        assert plan["block_n"] == launch["block_n"], case.args
        assert plan["options"]["num_warps"] == launch["num_warps"], case.args
    # several query rows per program keep their own table entries (not measured with this rule)
    plan = module._make_plan(32, 64, 32 * 1024, torch.device("meta"))
    assert plan["q_rows"] == 2 and plan["block_n"] == module.LAUNCH[(2, False)]["block_n"]
    assert plan["options"]["num_warps"] == module.LAUNCH[(2, False)]["num_warps"]
    # under the interpreter (no SM count) the rule is off: the short tile, as before
    plan = module._make_plan(256, 256, 256 * 1024, torch.device("cpu"))
    assert plan["block_n"] == short["block_n"] and plan["options"]["num_warps"] == short["num_warps"]


@pytest.mark.parametrize("name", GLUON_FILES)
def test_gluon_path_gets_a_16_byte_aligned_cache(problem, cpu, name):
    """The Gluon kernel copies the cache in 16-byte pieces (cp.async): a cache view that does not
    start on a 16-byte boundary reaches it as an aligned copy with the same values, and an aligned
    one as it is. (The launches are recorded here, not run: the kernel needs an sm_90 GPU.)"""
    import torch

    module = load_submission(name, "sm90_align")
    if module.gluon is None:
        pytest.skip("this Triton has no Gluon")
    q, kv_data, qo_indptr, kv_indptr, config = problem.generate(
        {"batchsize": 2, "qseqlen": 1, "kvseqlen": 64}, 3, cpu.torch_device)
    fmt = "fp8" if name == "triton_fp8.py" else "mxfp4"
    codes, scale = kv_data[fmt]
    launched = []
    module._launch = lambda plan, kernel, grid, args, constexprs, options: launched.append((kernel, args))
    module._PLANS[(2, q.shape[0], codes.shape[0], q.device)] = dict(
        sm90=module.SM90_LAUNCH, grid=(2, 1), splits=1, q_groups=1, qk_scaled=False, part_out=None, part_lse=None,
        block_n=64, options=dict(num_warps=4), direct={})
    raw = torch.empty(codes.numel() + 1, dtype=torch.uint8)
    shifted = raw[1:].view(codes.dtype).view(codes.shape)
    shifted.copy_(codes)
    for cache, aligned_as_given in ((codes, True), (shifted, False)):
        launched.clear()
        module.custom_kernel((q, {**kv_data, fmt: (cache, scale)}, qo_indptr, kv_indptr, config))
        sm90_kernels = (getattr(module, "_mla_decode_sm90_kernel", None), getattr(module, "_mla_decode_sm90_ws_kernel", None))
        kv_arg = next(args[1] for kernel, args in launched if kernel in sm90_kernels)
        assert kv_arg.data_ptr() % 16 == 0 and torch.equal(kv_arg.view(torch.uint8), codes.view(torch.uint8))
        assert (kv_arg.data_ptr() == cache.data_ptr()) == aligned_as_given   # the same memory, or a copy


def _run_interpreted(argv: list[str], timeout: float):
    """`python argv...` in a fresh process on the CPU under Triton's interpreter (whether Triton
    interprets is fixed when a kernel is defined, so it cannot be switched on in this process)."""
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env={**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""})


_SPLIT_KV_CHECK = """
import sys
import torch
from harness.task.problem import load_problem
from harness.worker.loop import load_module
root, name = sys.argv[1], sys.argv[2]
module = load_module(root + "/submissions/" + name, "split_" + name[:-3])
module.MIN_TILES_PER_SPLIT, module.CPU_PROGRAM_SLOTS, module.PARTIAL_LIMIT = 1, 64, 1e9
problem = load_problem(root + "/task.yml")
for dtype, (args, seed) in (("float32", ({"batchsize": 3, "qseqlen": 1, "kvseqlen": 200, "kvseqlens": [200, 33, 129]}, 5)),
                            ("float32", ({"batchsize": 2, "qseqlen": 2, "kvseqlen": 96}, 6)),
                            ("float16", ({"batchsize": 3, "qseqlen": 1, "kvseqlen": 200, "kvseqlens": [200, 33, 129]}, 7))):
    module.PARTIAL_DTYPE = dtype
    module._PLANS.clear()
    data = problem.generate(args, seed, torch.device("cpu"))
    plan = module._make_plan(args["batchsize"], data[0].shape[0], int(data[3][-1]), torch.device("cpu"))
    ok, why = problem.check(module.custom_kernel(data), problem.expected(data))
    print(args, dtype, "splits", plan["splits"], "ok" if ok else "WRONG: " + why)
    assert plan["splits"] >= 3 and plan["part_out"].dtype == getattr(torch, dtype) and ok
"""


@pytest.mark.parametrize("name", TRITON_KERNELS)
def test_split_kv_partials_and_their_merge_match_the_reference(name):
    """The small CPU cases mostly fit in one split (fp8 and mxfp4: in all of them), so here every
    Triton file is made to cut each sequence's KV range into several chunks (some empty, in a
    ragged batch; two query rows per sequence in the second case), and its partial results and
    their merge by the second kernel are checked against the reference in Triton's interpreter; the
    first case again with fp16 partial outputs (the PARTIAL_DTYPE knob)."""
    run = _run_interpreted(["-c", _SPLIT_KV_CHECK, str(ROOT), name], timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run.stdout.count(" ok") == 3, run.stdout


def test_every_e4m3_value_is_exact_in_fp16():
    """triton_fp8.py multiplies in fp16 after converting the cache: that is exact only if every
    e4m3 value (both variants: OCP and MI300's fnuz) is an fp16 value."""
    import torch

    codes = torch.arange(256, dtype=torch.uint8)
    for dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        values = codes.view(dtype).float()
        finite = torch.isfinite(values)
        assert torch.equal(values[finite].half().float(), values[finite])


def test_mxfp4_decoding_is_bit_exact_for_every_code_and_exponent():
    """triton_mxfp4.py's portable decoder (the one the interpreter and AMD GPUs run), through
    lab/mxfp4_decode_check.py: all 256 byte values under all 255 exponents, bit for bit
    against harness.task.quant. (The same tool checks the PTX decoder on an NVIDIA GPU.)"""
    run = _run_interpreted([str(ROOT / "lab" / "mxfp4_decode_check.py")], timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert "portable decoder: 293760 of 293760 values bit-exact" in run.stdout


_ABS_MAX_CHECK = """
import sys
import torch
from harness.worker.loop import load_module
module = load_module(sys.argv[1] + "/submissions/triton_fp8.py", "abs_max")
for n, programs, block in ((1000, 3, 64), (4096, 2, 2048), (37, 4, 16), (5, 1, 16)):
    x = (torch.randn(n, generator=torch.Generator().manual_seed(n)) * 3).to(torch.bfloat16)
    x[n // 2] = -40.0 if n > 5 else x[n // 2]        # the largest magnitude, negative, mid-range
    parts = torch.full((programs,), -1.0)
    module._abs_max_kernel[(programs,)](x, parts, n, BLOCK=block)
    want = x.float().abs().amax()
    print(n, programs, block, float(parts.max()), float(want))
    assert float(parts.max()) == float(want) and bool((parts >= 0).all())
"""


def test_fp8_abs_max_kernel_finds_the_largest_magnitude_over_every_program_and_tail():
    """`_abs_max_kernel` (the q scale of triton_fp8.py's Gluon path) in the interpreter: element
    counts that are not a multiple of the block, more programs than blocks and fewer, a negative
    largest value; every program writes its partial maximum and their maximum is |x|'s."""
    run = _run_interpreted(["-c", _ABS_MAX_CHECK, str(ROOT)], timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


_MXFP4_SCALE_LAYOUT_CHECK = """
import sys
import torch
from harness.task.problem import load_problem
from harness.worker.loop import load_module
root = sys.argv[1]
module = load_module(root + "/submissions/triton_mxfp4.py", "scale_layout")
problem = load_problem(root + "/task.yml")
q, kv_data, qo, kv, config = problem.generate({"batchsize": 2, "qseqlen": 1, "kvseqlen": 70}, 9, torch.device("cpu"))
packed, scales = kv_data["mxfp4"]
column_major = scales.t().contiguous().t()   # the same values, exponents of a row 'rows' bytes apart
assert column_major.stride(-1) != 1 and torch.equal(column_major.view(torch.uint8), scales.view(torch.uint8))
data = (q, {**kv_data, "mxfp4": (packed, column_major)}, qo, kv, config)
ok, why = problem.check(module.custom_kernel(data), problem.expected(data))
print(why)
assert ok, why
"""


def test_mxfp4_reads_exponents_given_in_any_memory_layout():
    """triton_mxfp4.py with its e8m0 exponents as a non-contiguous (column-major) view of the same
    values: the kernels step along a row's exponents byte by byte, so the file makes such a view
    contiguous first; the output matches (interpreter, portable path)."""
    run = _run_interpreted(["-c", _MXFP4_SCALE_LAYOUT_CHECK, str(ROOT)], timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
