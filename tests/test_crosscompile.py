"""The cross-compile report (harness/compile/): the Triton kernels a file launches on each
target, planned as on that target's GPU, compiled offline with the compiler's own numbers and named
messages for the usual traps; the report read at 80 and 120 columns."""

import contextlib
import importlib.metadata
import io
import json
import re
import sys
import textwrap

import pytest
from rich.cells import cell_len
from rich.console import Console

from conftest import ROOT
from harness.compile.assembly import amd_occupancy, matrix_instructions, parse_amdgcn
from harness.compile.report import CompileReport, CrossCompileError, matrix_kind, read_report, report_markdown
from harness.compile.run import cross_compile_report, main
from harness.compile.targets import (AMD_OPTIONS_ON_NVIDIA, FP8_OCP_ON_GFX942, KPACK_ON_GFX950, NO_MATRIX, PLANNED_ON_CPU,
                                     TARGET_DEVICES, XF32_MFMA, parse_target)

TASK = ROOT / "task.yml"
AMD_STYLE = ROOT / "tests" / "amd_style"
MXFP4 = ROOT / "submissions" / "triton_mxfp4.py"
# The README's line of what `python eval.py --mode compile --target gfx950 --submission
# submissions/triton_mxfp4.py` prints for every _mla_decode_kernel row, with the Triton it was compiled by.
README_GFX950 = re.compile(
    r"^MI355X numbers \(Triton (?P<triton>\d+\.\d+)\): (?P<vgpr>\d+) VGPRs, (?P<agpr>\d+) AGPRs, "
    r"(?P<scratch_bytes>\d+) B scratch, (?P<spill_vgpr>\d+) VGPR and (?P<spill_sgpr>\d+) SGPR spills, "
    r"(?P<lds_kib>\d+(?:\.\d+)?) KiB LDS, (?P<occupancy>\d+) waves per SIMD, MFMA (?P<matrix>.+)$", re.M)


def readme_gfx950() -> dict:
    """The numbers the README quotes for the MI355X report of triton_mxfp4.py, read from its one
    `MI355X numbers (Triton X.Y): ...` line: the row keys they stand for, the Triton version and the
    set of matrix kinds."""
    lines = list(README_GFX950.finditer((ROOT / "README.md").read_text()))
    assert len(lines) == 1, f"README.md: {len(lines)} lines match {README_GFX950.pattern!r}, expected one"
    found = lines[0].groupdict()
    numbers = {key: int(found[key]) for key in ("vgpr", "agpr", "scratch_bytes", "spill_vgpr", "spill_sgpr",
                                                "occupancy")}
    numbers["lds_bytes"] = round(float(found["lds_kib"]) * 1024)
    return {"triton": found["triton"], "matrix": set(found["matrix"].split(" + ")), "numbers": numbers}


def _modules_from(path) -> set:
    return {name for name, m in list(sys.modules.items()) if getattr(m, "__file__", None) == str(path)}


@pytest.fixture(scope="module")
def bf16_rows():
    """The report, and whether making it imported the submission into this process (it must not;
    other tests may have loaded the file before)."""
    path = ROOT / "submissions" / "triton_bf16.py"
    before = _modules_from(path)
    rows = cross_compile_report(path, ["gfx950", "gfx942"], TASK, cases=1)
    return rows, _modules_from(path) - before


def _compile_independently(row: dict, monkeypatch, tmp_path):
    """triton.compile, called here on the row's own compile arguments, with triton_bf16.py's kernel
    loaded in this process (without the interpreter)."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from harness.worker.loop import load_module

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    module = load_module(ROOT / "submissions" / "triton_bf16.py", "crosscompile_check_bf16")
    args = row["compile_args"]

    def key(text):
        return tuple(int(part) for part in text.split(","))

    constexprs = {key(k): tl.dtype(v["dtype"]) if isinstance(v, dict) else v for k, v in args["constexprs"].items()}
    attrs = {key(k): v for k, v in args["attrs"].items()}
    source = ASTSource(getattr(module, row["kernel"]), args["signature"], constexprs, attrs)
    return triton.compile(source, target=GPUTarget("hip", row["target"], 64), options=args["options"])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:TRITON_DEFAULT_FP_FUSION")
def test_bf16_compiles_for_both_amd_targets_without_spills_on_mfma(bf16_rows, monkeypatch, tmp_path):
    """triton_bf16.py as it launches on ROCm (its own plan there: bf16 operands, not the interpreter's
    fp32, and AMD's launch option): both kernels compile for gfx950 and gfx942 with no
    spills; the decode kernel uses bf16 MFMA; its VGPR / AGPR / SGPR counts and LDS bytes are the
    compiler's own (compiled again here from the same arguments), and the occupancy the report
    derives from them is the one LLVM writes into the assembly. The parent never imported the file."""
    bf16_rows, imported_here = bf16_rows
    assert {(r["kernel"], r["target"]) for r in bf16_rows} == {
        (k, t) for k in ("_mla_decode_kernel", "_combine_splits_kernel") for t in ("gfx950", "gfx942")}
    for row in bf16_rows:
        assert row["status"] == "compiled" and row["on_target"], row
        assert (row["spill_vgpr"], row["spill_sgpr"], row["scratch_bytes"]) == (0, 0, 0), row
        assert row["sandboxed"] == (_sandbox_problem() is None)
    for row in (r for r in bf16_rows if r["kernel"] == "_mla_decode_kernel"):
        assert row["matrix"] and all(re.fullmatch(r"v_mfma_f32_\w+_bf16", name) for name in row["matrix"]), row
        assert row["constexprs"]["DOT_DTYPE"] == {"dtype": "bf16"} and row["options"]["matrix_instr_nonkdim"] == 16
        kernel = _compile_independently(row, monkeypatch, tmp_path)
        own = parse_amdgcn(kernel.asm["amdgcn"])
        assert (row["vgpr"], row["agpr"], row["sgpr"]) == (own["vgpr"], own["agpr"], own["sgpr"])
        assert row["lds_bytes"] == kernel.metadata.shared > 0
        assert row["occupancy_limit"] != "LDS"
        assert row["occupancy"] == row["compiler_occupancy"] == own["compiler_occupancy"]
    assert not imported_here


def _sandbox_problem():
    from harness.parent.launch import sandbox_problem

    return sandbox_problem()


COMPETITION_TASK = ROOT / "tasks" / "competition" / "task.yml"


def _numbers(row: dict) -> dict:
    """What a failed assertion shows of a row."""
    keys = ("kernel", "target", "plan", "status", "error", "vgpr", "agpr", "sgpr", "spill_vgpr", "spill_sgpr",
            "scratch_bytes", "lds_bytes", "occupancy", "matrix", "notes")
    return {key: row[key] for key in keys} | {"NUM_SPLITS": row["constexprs"].get("NUM_SPLITS")}


@pytest.mark.slow
@pytest.mark.parametrize("name, targets, mfma", [
    ("triton_fp8.py", ["gfx950", "gfx942"], r"v_mfma_f32_\w+_f16"),
    ("triton_mxfp4.py", ["gfx942"], r"v_mfma_f32_\w+_bf16"),  # (gfx950's dot_scaled variant: the MI355X tests)
])
def test_fp8_and_mxfp4_compile_as_planned_on_rocm_without_scratch_on_mfma(name, targets, mfma):
    """CI gate: triton_fp8.py and triton_mxfp4.py's portable path, planned as on each GPU (their AMD
    plan: fp16 / bf16 operands, AMD_LAUNCH, AMD_LAUNCH_OPTIONS), compile with no kernel spilling to
    scratch memory, and the decode kernel's matrix products all run as MFMA of its operand type.
    The competition task's two small cases launch both decode epilogues (one split, the bf16 output;
    several, the fp32 partials) and the combine kernel. On gfx942 fp8's decode kernel moves ~480 SGPRs
    into VGPR lanes (no scratch, allowed): the inputs are the task's CPU ones, OCP e4m3 where MI300
    gets fnuz, with which nothing spills."""
    rows = cross_compile_report(ROOT / "submissions" / name, targets, COMPETITION_TASK, cases=2)
    assert {(r["kernel"], r["target"]) for r in rows} == {
        (k, t) for k in ("_mla_decode_kernel", "_combine_splits_kernel") for t in targets}
    for row in rows:
        assert row["status"] == "compiled" and row["scratch_bytes"] == 0 and row["spill_vgpr"] == 0, _numbers(row)
        assert row["on_target"], _numbers(row)
    decode = [r for r in rows if r["kernel"] == "_mla_decode_kernel"]
    assert {r["constexprs"]["NUM_SPLITS"] > 1 for r in decode} == {False, True}  # (the count: the GPU's CUs)
    for row in decode:
        assert not row["constexprs"].get("QK_SCALED") and row["options"]["matrix_instr_nonkdim"] == 16
        assert row["matrix"] and all(re.fullmatch(mfma, instr) for instr in row["matrix"]), _numbers(row)


@pytest.fixture(scope="module")
def mi355x(tmp_path_factory):
    """`python eval.py --mode compile --target gfx950 --submission submissions/triton_mxfp4.py`, as a
    user runs it: (exit code, what it printed, the rows of its --json export)."""
    from conftest import cli

    folder = tmp_path_factory.mktemp("mi355x")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli(folder, "--mode", "compile", "--target", "gfx950", "--json", str(folder / "compile.json"),
                   "--submission", str(MXFP4))
    (rows,) = json.loads((folder / "compile.json").read_text())["submissions"].values()
    return code, printed.getvalue(), rows


@pytest.mark.slow  # (compiles kernels for a GPU target on the CPU: seconds each)
def test_mi355x_report_compiles_and_names_the_variant_gfx950_runs(mi355x):
    """The MI355X report of triton_mxfp4.py is the kernel an MI355X would run: planned as on that GPU,
    the file picks its gfx950 variant (q.K^T by tl.dot_scaled on the packed keys: QK_SCALED, the
    fp8 query; bf16 P.V; AMD's launch option), the report names it, and it compiles to the fp8 x fp4
    scaled MFMA and bf16 MFMA (no fp32 MFMA) without scratch, with the numbers the README's line quotes.
    Another Triton's compiler allocates registers and LDS differently: there, of the README's numbers,
    only scratch, spills and the matrix kinds are compared, and the rest is held to what the variant
    must keep (at most 256 VGPRs, the 2 waves per SIMD it is tuned for)."""
    code, printed, rows = mi355x
    assert code == 0
    text = " ".join(printed.split())
    assert "gfx950: launches planned as on AMD Instinct MI355X (ROCm, gfx950, 256 CUs)" in text
    assert "_mla_decode_kernel: DOT_DTYPE=bf16 PTX_DECODE=False QK_SCALED=True" in text
    assert {r["kernel"] for r in rows} == {"_mla_decode_kernel", "_combine_splits_kernel"}
    assert all(r["target"] == "gfx950" and r["on_target"] and "MI355X" in r["plan"] for r in rows)
    decode = [r for r in rows if r["kernel"] == "_mla_decode_kernel"]
    assert {r["constexprs"]["NUM_SPLITS"] > 1 for r in decode} == {False, True}  # both epilogues
    readme = readme_gfx950()
    exact = importlib.metadata.version("triton").startswith(readme["triton"] + ".")
    always = ("scratch_bytes", "spill_vgpr", "spill_sgpr")
    for row in decode:
        assert row["constexprs"]["QK_SCALED"] is True and row["constexprs"]["DOT_DTYPE"] == {"dtype": "bf16"}
        assert row["options"] == {"num_warps": 4, "num_stages": 2, "matrix_instr_nonkdim": 16}
        assert row["status"] == "compiled", _numbers(row)
        assert {matrix_kind(name) for name in row["matrix"]} == {"f8f6f4 scaled", "bf16"}, _numbers(row)
        assert {matrix_kind(name) for name in row["matrix"]} == readme["matrix"], _numbers(row)
        assert any(re.fullmatch(r"v_mfma_scale_f32_\w+_f8f6f4", name) for name in row["matrix"])
        assert (row["spill_vgpr"], row["spill_sgpr"], row["scratch_bytes"]) == (0, 0, 0), _numbers(row)
        assert {key: row[key] for key in always} == {key: readme["numbers"][key] for key in always}, _numbers(row)
        if exact:
            assert {key: row[key] for key in readme["numbers"]} == readme["numbers"], _numbers(row)
        else:
            assert row["vgpr"] <= 256 and row["occupancy"] >= 2, _numbers(row)
    assert "f8f6f4 scaled" in text and "v_mfma_scale_f32_16x16x128_f8f6f4" in text


def render(renderable, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def _whole(token: str, text: str) -> bool:
    """`token` in `text` with no word character on either side: never folded or cut."""
    return re.search(rf"(?<![\w]){re.escape(token)}(?![\w])", text) is not None


@pytest.mark.parametrize("width", [80, 120])
def test_the_mi355x_report_reads_at_80_and_120_columns(mi355x, width):
    """At 80 and 120 columns no line is wider, and every name, number and instruction is whole: at
    120 the table (each label's kernel over what sets it apart), at 80 a paragraph per row."""
    rows = mi355x[2]
    text = render(CompileReport(rows, "triton_mxfp4.py", ["gfx950"]), width)
    assert max(cell_len(line) for line in text.splitlines()) <= width, text
    for row in rows:
        for token in (row["kernel"], row["status"], str(row["vgpr"]), str(row["sgpr"]), *row["matrix"],
                      f"NUM_SPLITS={row['constexprs']['NUM_SPLITS']}"):
            assert _whole(token, text), (token, text)
    joined = " ".join(text.split())
    assert "launches planned as on AMD Instinct MI355X (ROCm, gfx950, 256 CUs)" in joined
    assert "QK_SCALED=True" in joined and "16.0 KiB" in joined
    if width == 120:
        assert "│ 1 │ _mla_decode_kernel " in text and "┃ # ┃" in text
    else:
        assert "1 _mla_decode_kernel Q_GROUPS=1 NUM_SPLITS=1: compiled" in text
        assert "238 VGPRs, 58 SGPRs, no scratch, LDS 16.0 KiB, 2 waves per SIMD (VGPR)" in joined


@pytest.mark.slow
def test_amd_launch_options_are_named_for_nvidia_and_kpack_on_gfx950():
    """tests/amd_style/launch_options.py (waves_per_eu, matrix_instr_nonkdim, kpack on every launch):
    compiles for both AMD targets at the 2 waves per SIMD it asks for; gfx950 says kpack is ignored;
    gfx942 says its fp32 dots run as xf32; sm_90 fails with the named message listing the three
    options, in one line."""
    rows = cross_compile_report(AMD_STYLE / "launch_options.py", ["gfx950", "gfx942", "sm_90"], TASK, cases=1)
    by_target = {row["target"]: row for row in rows}
    assert len(rows) == 3
    for target in ("gfx950", "gfx942"):
        row = by_target[target]
        assert row["status"] == "compiled" and row["matrix"] and row["occupancy"] == 2, row
    assert KPACK_ON_GFX950.format(value=2) in by_target["gfx950"]["notes"]
    assert not any("kpack" in note for note in by_target["gfx942"]["notes"])
    assert by_target["gfx942"]["matrix"] == ["v_mfma_f32_16x16x8_xf32"] and XF32_MFMA in by_target["gfx942"]["notes"]
    nvidia = by_target["sm_90"]
    assert nvidia["status"] == "failed"
    assert nvidia["error"] == AMD_OPTIONS_ON_NVIDIA.format(names="kpack, matrix_instr_nonkdim, waves_per_eu")


@pytest.mark.slow
def test_float8_e4m3fn_is_named_on_gfx942_only():
    """tests/amd_style/fp8_e4m3fn.py (OCP fp8 KV loads): compiles for both; only gfx942 (whose fp8 is
    e4m3fnuz) gets the named message."""
    rows = cross_compile_report(AMD_STYLE / "fp8_e4m3fn.py", ["gfx950", "gfx942"], TASK, cases=1)
    by_target = {row["target"]: row for row in rows}
    assert all(row["status"] == "compiled" for row in rows), rows
    assert by_target["gfx942"]["signature"]["kv_ptr"] == "*fp8e4nv"
    assert FP8_OCP_ON_GFX942 in by_target["gfx942"]["notes"]
    assert not any("e4m3" in note for note in by_target["gfx950"]["notes"])


BROKEN = '''
import torch
import triton
import triton.language as tl

print("printed by the submission at import")


@triton.jit
def _copy_first_rows(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    for i in range(0, 4):
        if i == 2:
            break  # the interpreter runs this; Triton's compiler has no break
        tl.store(y_ptr + i * N + offs, tl.load(x_ptr + i * N + offs))


@triton.jit
def _transpose_tile(x_ptr, y_ptr, ROWS: tl.constexpr, COLS: tl.constexpr):
    r = tl.arange(0, ROWS)
    c = tl.arange(0, COLS)
    tile = tl.load(x_ptr + r[:, None] * COLS + c[None, :])
    tl.store(y_ptr + c[:, None] * ROWS + r[None, :], tl.trans(tile))


@triton.jit
def _int8_product(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    a = tl.load(a_ptr + o[:, None] * N + o[None, :])
    b = tl.load(b_ptr + o[:, None] * N + o[None, :])
    tl.store(c_ptr + o[:, None] * N + o[None, :], tl.dot(a, b))


def custom_kernel(data):
    print("printed by the submission in a call")
    x, y = torch.ones(4, 16), torch.zeros(4, 16)
    _copy_first_rows[(1,)](x, y, N=16)
    tile = torch.randn(128, 256)
    _transpose_tile[(1,)](tile, torch.empty(256, 128), ROWS=128, COLS=256)
    small = torch.ones(16, 16, dtype=torch.int8)
    _int8_product[(1,)](small, small, torch.empty(16, 16, dtype=torch.int32), N=16)
    return torch.zeros(data[0].shape[0], 16, 512, dtype=torch.bfloat16)
'''


@pytest.mark.slow
def test_a_broken_kernel_gives_one_line_and_lds_and_vector_fallbacks_are_named(tmp_path, capsys):
    """Through the command line: a kernel the interpreter runs but the compiler rejects fails with
    one line naming its source line, not a traceback; a 128 KiB transpose tile fits gfx950's LDS but
    not gfx942's, which says the launch would fail; a 16x16 int8 tl.dot compiles to no matrix
    instruction, which is named; what the submission prints does not disturb the report; the exit
    code is 1 (not everything compiled) and --json holds the rows."""
    submission = tmp_path / "broken.py"
    submission.write_text(textwrap.dedent(BROKEN))
    out = tmp_path / "report.json"
    code = main(["--submission", str(submission), "--task", str(TASK), "--cases", "1", "--target", "gfx950",
                 "--target", "gfx942", "--json", str(out)])
    assert code == 1
    rows = {(row["kernel"], row["target"]): row for row in json.loads(out.read_text())}
    for target in ("gfx950", "gfx942"):
        broken = rows["_copy_first_rows", target]
        assert broken["status"] == "failed"
        line = next(i for i, text in enumerate(BROKEN.splitlines()) if text.strip().startswith("break"))
        assert broken["error"] == f"UnsupportedLanguageConstruct at line {line + 1}: unsupported AST node type: Break"
    assert rows["_transpose_tile", "gfx950"]["status"] == "compiled"
    narrow = rows["_transpose_tile", "gfx942"]
    assert narrow["status"] == "won't launch" and narrow["lds_bytes"] == 128 << 10
    assert "needs 128.0 KiB of LDS; gfx942 has 64 KiB per workgroup" in " ".join(narrow["notes"])
    for target in ("gfx950", "gfx942"):
        fallback = rows["_int8_product", target]
        assert fallback["status"] == "compiled" and fallback["uses_dot"] and fallback["matrix"] == []
        assert NO_MATRIX in fallback["notes"]
    printed = capsys.readouterr().out
    assert "won't launch" in printed and "Traceback" not in printed and "printed by the submission" not in printed


READS_ON_HOST = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, N: tl.constexpr, ON_GPU: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


def custom_kernel(data):
    q, kv_data, qo_indptr, kv_indptr, config = data
    lengths = kv_indptr.tolist()  # read on the host: a GPU run syncs here, a tensor without values cannot
    x = torch.ones(16, device=q.device)
    _copy[(1,)](x, torch.empty_like(x), N=16, ON_GPU=torch.cuda.is_available())
    return torch.zeros(q.shape[0], 16, 512, dtype=torch.bfloat16, device=q.device)
'''


@pytest.mark.slow  # (compiles kernels for a GPU target on the CPU: seconds each)
def test_launches_that_cannot_be_planned_as_on_the_gpu_come_from_the_cpu_and_say_why(tmp_path):
    """A file that reads tensor values on the host cannot be planned without them; a target with no
    GPU in TARGET_DEVICES has none to plan on: both get the launches of Triton's interpreter on the
    CPU (the file's CPU variant: ON_GPU=False), compiled, and each row says so and why."""
    submission = tmp_path / "reads_on_host.py"
    submission.write_text(READS_ON_HOST)
    rows = cross_compile_report(submission, ["gfx950", "gfx90a"], TASK, cases=1)
    by_target = {row["target"]: row for row in rows}
    assert len(rows) == 2 and all(r["status"] == "compiled" and not r["on_target"] for r in rows), rows
    assert all(row["constexprs"]["ON_GPU"] is False for row in rows)
    prefix = PLANNED_ON_CPU.format(device="AMD Instinct MI355X", why="custom_kernel raised on case ")
    plan = by_target["gfx950"]["plan"]
    assert plan.startswith(prefix) and "DataDependentOutputException" in plan
    assert by_target["gfx90a"]["plan"] == PLANNED_ON_CPU.format(
        device="gfx90a", why=f"no GPU known for gfx90a (TARGET_DEVICES: {', '.join(TARGET_DEVICES)})")


@pytest.mark.slow  # (compiles kernels for a GPU target on the CPU: seconds each)
def test_a_submission_without_triton_kernels_gives_no_rows():
    assert cross_compile_report(ROOT / "submissions" / "torch_loop.py", ["gfx950"], TASK, cases=1) == []


def test_a_run_past_its_time_is_stopped(tmp_path):
    submission = tmp_path / "sleeps.py"
    submission.write_text("import time\ntime.sleep(120)\n\ndef custom_kernel(data):\n    return None\n")
    with pytest.raises(CrossCompileError, match="took over 2 s and was stopped"):
        cross_compile_report(submission, ["gfx950"], TASK, timeout=2)


def test_bad_targets_and_overrides_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="unknown target 'mi300'"):
        cross_compile_report(ROOT / "submissions" / "triton_bf16.py", ["mi300"], TASK)
    with pytest.raises(ValueError, match="NAME=VALUE"):
        cross_compile_report(ROOT / "submissions" / "triton_bf16.py", ["gfx950"], TASK, constexprs=["DOT_DTYPE"])
    assert parse_target("gfx950") == ("hip", "gfx950", 64) and parse_target("sm_100") == ("cuda", 100, 32)


AMDGCN = """
; Kernel info:
; TotalNumSgprs: 82
; NumVgprs: 254
; NumAgprs: 104
; TotalNumVgprs: 360
; ScratchSize: 0
; Occupancy: 1
amdhsa.kernels:
  - .agpr_count:     104
    .private_segment_fixed_size: 0
    .sgpr_count:     82
    .sgpr_spill_count: 0
    .vgpr_count:     360
    .vgpr_spill_count: 0
"""


def test_register_counts_and_occupancy_from_the_assembly():
    assert parse_amdgcn(AMDGCN) == {"vgpr": 360, "agpr": 104, "sgpr": 82, "spill_vgpr": 0, "spill_sgpr": 0,
                                    "scratch_bytes": 0, "compiler_occupancy": 1}
    assert amd_occupancy("gfx950", 360, 82, 40 << 10, 4) == (1, "VGPR")
    assert amd_occupancy("gfx942", 20, 20, 0, 4) == (8, "max")
    assert amd_occupancy("gfx942", 104, 20, 0, 4) == (4, "VGPR")        # 512 // 104
    assert amd_occupancy("gfx942", 24, 20, 32 << 10, 4) == (2, "LDS")   # two workgroups of 4 waves per CU
    assert amd_occupancy("gfx942", 24, 20, 96 << 10, 4) == (0, "LDS")
    assert amd_occupancy("gfx950", 24, 20, 96 << 10, 8) == (2, "LDS")
    assert amd_occupancy("gfx950", 24, 120, 0, 4) == (6, "SGPR")
    assert amd_occupancy("gfx90a", 24, 20, 0, 4) == (None, "")
    assert matrix_instructions("v_mfma_f32_16x16x32_bf16 v[0:3]\n v_mfma_scale_f32_16x16x128_f8f6f4 a", "hip") == [
        "v_mfma_f32_16x16x32_bf16", "v_mfma_scale_f32_16x16x128_f8f6f4"]
    assert matrix_instructions("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {", "cuda") == [
        "wgmma.mma_async.m64n128k16.f32.bf16.bf16"]


def _row(**fields):
    row = {"kernel": "k", "target": "gfx950", "plan": "launches planned as on AMD Instinct MI355X", "on_target": True,
           "status": "compiled", "error": None, "launches": 1, "cases": ["2×64"],
           "signature": {"x": "*fp32"}, "constexprs": {"N": 16}, "options": {"num_warps": 4}, "overrides": [],
           "compile_args": {}, "vgpr": 20, "agpr": 0, "sgpr": 20, "spill_vgpr": 0, "spill_sgpr": 0,
           "scratch_bytes": 0, "lds_bytes": 0, "occupancy": 8, "occupancy_limit": "max", "compiler_occupancy": 8,
           "num_warps": 4, "matrix": [], "uses_dot": False, "notes": []}
    row.update(fields)
    return row


@pytest.mark.parametrize("raw, message", [
    (b"not json", "not valid JSON"),
    (b"[1, 2]", "not an object with a list of rows"),
    (json.dumps({"rows": [_row(vgpr="20")]}).encode(), "row 0: vgpr is str"),
    (json.dumps({"rows": [_row(vgpr=True)]}).encode(), "row 0: vgpr is bool"),
    (json.dumps({"rows": [_row(status="fast")]}).encode(), "unknown status"),
    (json.dumps({"rows": [_row(notes=[3])]}).encode(), "notes holds a non-string"),
    (json.dumps({"rows": [_row()], "problem": 7}).encode(), "problem is not a string"),
])
def test_the_parent_reads_the_report_strictly(raw, message):
    with pytest.raises(CrossCompileError, match=message):
        read_report(raw)


def test_long_strings_are_cut_and_the_report_renders():
    rows, problem = read_report(json.dumps({"rows": [_row(notes=["x" * 5000], extra="dropped")]}).encode())
    assert problem is None and len(rows[0]["notes"][0]) == 600 and "extra" not in rows[0]
    assert "compiled" in render(CompileReport(rows, "k.py", ["gfx950"]), 200)
    markdown = report_markdown([_row(kernel="a|b <img src=x> https://example.invalid")]).splitlines()
    assert markdown[0].startswith("| kernel | target | status |") and len(markdown) == 3
    # every cell a code span: a forged report's text shows as typed (no HTML, link or autolink)
    assert markdown[2].startswith("| ` a\\|b <img src=x> https://example.invalid warps=4 ` | ` gfx950 ` | ` compiled ` "
                                  "| ` 20 ` | ` 20 ` | ` 0 ` | ` 0 ` | ` 8 (max) ` | ` - ` |")


LONG_ERROR = ("CompilationError at line 348: 'constexpr_type' object has no attribute 'scalar' while lowering "
              "tl.load of q_scale_ptr in _mla_decode_kernel, a constexpr None where a pointer was launched")
CPU_PLAN = PLANNED_ON_CPU.format(device="AMD Instinct MI300X", why="custom_kernel raised on case 2×64 as on AMD "
                                 "Instinct MI300X: DataDependentOutputException: aten._local_scalar_dense.default")
MIXED = [  # one target as on its GPU: a spilling row, a failed one, one that won't launch; one from the CPU
    _row(kernel="_mla_decode_kernel", constexprs={"NUM_SPLITS": 1, "DOT_DTYPE": {"dtype": "bf16"}}, vgpr=512, agpr=256,
         sgpr=50, spill_vgpr=56, scratch_bytes=228, lds_bytes=32 << 10, occupancy=1, occupancy_limit="VGPR",
         matrix=["v_mfma_f32_16x16x4_f32"], uses_dot=True,
         notes=["spills to scratch memory: 228 B per lane (56 VGPRs, 0 SGPRs spilled)"]),
    _row(kernel="_mla_decode_kernel", constexprs={"NUM_SPLITS": 2, "DOT_DTYPE": {"dtype": "bf16"}}, status="failed",
         error=LONG_ERROR, vgpr=None, agpr=None, sgpr=None, scratch_bytes=None, lds_bytes=None, occupancy=None),
    _row(kernel="_transpose_tile_with_a_long_name", status="won't launch", lds_bytes=192 << 10, occupancy=0,
         occupancy_limit="LDS", notes=["needs 192.0 KiB of LDS; gfx950 has 160 KiB per workgroup: the launch fails "
                                       "(out of resource: shared memory)"]),
    _row(target="gfx942", plan=CPU_PLAN, on_target=False, kernel="_combine_splits_kernel", vgpr=22, sgpr=20),
]


@pytest.mark.parametrize("width", [80, 120, 200])
def test_the_report_reads_at_every_width_with_every_number_and_reason_whole(width):
    """No line wider than the terminal; labels, numbers and instruction names whole; every error and
    note in full; a target planned on the CPU says so and why."""
    text = render(CompileReport(MIXED, "triton_mxfp4.py", ["gfx950", "gfx942"]), width)
    assert max(cell_len(line) for line in text.splitlines()) <= width, text
    joined = " ".join(text.split())
    for token in ("_mla_decode_kernel", "_transpose_tile_with_a_long_name", "_combine_splits_kernel", "NUM_SPLITS=2",
                  "512", "256", "228 B", "32.0 KiB", "192.0 KiB", "v_mfma_f32_16x16x4_f32", "failed", "won't launch"):
        assert _whole(token, text), (token, text)
    for sentence in (LONG_ERROR, CPU_PLAN, MIXED[0]["notes"][0], MIXED[2]["notes"][0],
                     "gfx950: launches planned as on AMD Instinct MI355X", "_mla_decode_kernel: DOT_DTYPE=bf16"):
        assert sentence in joined, sentence


AUTOTUNED = '''
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 16}, num_warps=2), triton.Config({"BLOCK": 64}, num_warps=4)],
                 key=["n"])
@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def custom_kernel(data):
    x, y = torch.ones(100), torch.empty(100)
    _double[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, y, 100)
    return torch.zeros(data[0].shape[0], 16, 512, dtype=torch.bfloat16)
'''


@pytest.mark.slow
def test_every_autotuning_configuration_is_compiled(tmp_path):
    """Autotuning times configurations on a GPU; without one every configuration is recorded instead
    (as a warm-up launch) and the first one is launched: the report compiles both."""
    submission = tmp_path / "autotuned.py"
    submission.write_text(AUTOTUNED)
    rows = cross_compile_report(submission, ["gfx942"], TASK, cases=1)
    seen = {(row["constexprs"]["BLOCK"], row["options"]["num_warps"], row["launches"]) for row in rows}
    assert seen == {(16, 2, 1), (64, 4, 0)} and all(row["status"] == "compiled" for row in rows)


@pytest.mark.slow
def test_a_compile_process_that_dies_is_reported_per_kernel(tmp_path):
    """A submission that ends the process once compiling starts (its import replaces triton.compile,
    outside the interpreter): every captured kernel is reported failed with the exit code, in one line."""
    submission = tmp_path / "dies.py"
    submission.write_text(AUTOTUNED.replace("import torch\n", "import os\nimport torch\nimport triton\n\n"
                                            "if not os.environ.get('TRITON_INTERPRET'):\n"
                                            "    triton.compile = lambda *args, **kwargs: os._exit(3)\n", 1))
    rows = cross_compile_report(submission, ["gfx950"], TASK, cases=1)
    assert len(rows) == 2
    assert all(row["status"] == "failed" and row["error"] == "the compile process ended with code 3 before "
               "finishing this kernel" for row in rows)


def test_a_missing_ptxas_is_said_in_one_line(monkeypatch):
    """Triton's wheel ships ptxas; where it cannot be found, NVIDIA targets are skipped with one line."""
    import triton.knobs

    from harness.compile.compiler import _ptxas_problem

    monkeypatch.setattr(triton.knobs.NvidiaTool, "from_path", staticmethod(lambda path: None))
    assert re.fullmatch(r"ptxas not found \(Cannot find ptxas[\w-]*\): NVIDIA targets need .*", _ptxas_problem(90))


@pytest.mark.slow
def test_eval_mode_compile_prints_and_exports_the_report(tmp_path, capsys):
    import json

    from conftest import cli

    out_json = tmp_path / "compile.json"
    code = cli(tmp_path, "--mode", "compile", "--target", "gfx950", "--json", str(out_json),  # (a small kernel: the
               "--submission", str(AMD_STYLE / "launch_options.py"))                    # bundled ones are above)
    out = " ".join(capsys.readouterr().out.split())
    assert "launch_options.py: Triton kernels compiled for gfx950" in out and "_decode_kernel" in out
    doc = json.loads(out_json.read_text())
    rows = next(iter(doc["submissions"].values()))
    assert doc["targets"] == ["gfx950"] and rows and {r["target"] for r in rows} == {"gfx950"}
    assert code == (0 if all(r["status"] == "compiled" for r in rows) else 1)
    from harness.report.store import Store  # stored with the run, as exported

    store = Store(tmp_path / "r.db")
    (run,) = store.runs()
    assert run["mode"] == "compile" and run["status"] == "complete"
    assert (run["submissions"], run["passed"]) == (1, 1 if code == 0 else 0)  # as --mode history shows it
    assert store.compile_reports(run["id"]) == json.loads(json.dumps(doc["submissions"], default=str))
    assert cli(tmp_path, "--mode", "compile", "--target", "gfx1", "--submission", str(ROOT / "submissions" / "triton_bf16.py")) == 2
    assert len(store.runs()) == 1  # a bad target is refused before a run is stored


@pytest.mark.slow
def test_a_forged_compile_report_reaches_the_terminal_as_plain_text_and_a_broken_one_fails_alone(tmp_path, capfd):
    """tests/zoo_os/forges_compile_report.py writes its own report from inside the capture process:
    its escape sequences are not printed; copied as bad_*.py its report cannot be rendered, which
    fails that file and the run goes on to the next."""
    from conftest import cli

    forged = ROOT / "tests" / "zoo_os" / "forges_compile_report.py"
    bad = tmp_path / "bad_forges_compile_report.py"
    bad.write_text(forged.read_text())
    code = cli(tmp_path, "--mode", "compile", "--target", "gfx950", "--submission", str(forged), "--submission",
               str(bad), "--submission", str(ROOT / "submissions" / "torch_loop.py"))
    out, err = capfd.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "ESC-INJECTED" in out and "mla_decode_fused" in out                  # shown, as text
    assert "bad_forges_compile_report.py: the report could not be shown" in " ".join(err.split())
    assert "torch_loop.py launched no Triton kernel" in out and code == 1


def test_nvidia_local_memory_counts_the_stack_frame_where_ptxas_spills():
    """cuobjdump's line for a kernel that spills on sm_90 (exp/bf16_swap.py's 64x8k specialization,
    which the H200 reported as 162 spilled registers): the spills are in STACK, not LOCAL."""
    from harness.compile.assembly import nvidia_local_bytes, parse_resource_usage

    text = ("Resource usage:\n Common:\n  GLOBAL:0\n Function _mla_decode_kernel:\n"
            "  REG:255 STACK:648 SHARED:0 LOCAL:0 CONSTANT[0]:528 TEXTURE:0 SURFACE:0 SAMPLER:0\n")
    usage = parse_resource_usage(text)
    assert usage == {"REG": 255, "STACK": 648, "SHARED": 0, "LOCAL": 0}
    assert nvidia_local_bytes(usage) == 648 == 162 * 4
    assert nvidia_local_bytes(parse_resource_usage("REG:40 STACK:0 SHARED:0 LOCAL:16")) == 16
    assert nvidia_local_bytes({}) is None


def test_a_failed_capture_reaches_the_terminal_without_control_characters(tmp_path, capfd):
    from conftest import cli

    code = cli(tmp_path, "--mode", "compile", "--target", "gfx950",
               "--submission", str(ROOT / "tests" / "zoo_os" / "escapes_compile_error.py"))
    out, err = capfd.readouterr()
    assert code == 1
    assert "the cross-compile process exited with code 3" in err and "check: pass" in err
    assert "\x1b" not in out + err and "\x07" not in out + err


@pytest.mark.slow  # (compiles kernels for a GPU target on the CPU: seconds each)
def test_a_report_over_its_limit_fails_the_file(monkeypatch):
    import harness.compile.run as run

    monkeypatch.setattr(run, "REPORT_LIMIT", 100)  # (a real report is a few KB)
    with pytest.raises(CrossCompileError, match="the report is larger than 100 bytes"):
        run.cross_compile_report(AMD_STYLE / "launch_options.py", ["gfx950"], TASK, cases=1)


def test_the_sandboxed_child_holds_only_the_childs_side():
    """The child's sandbox holds the harness modules its entry file imports (harness/parent/allowlist.py):
    the package's child side, none of the parent's (run.py, report.py, harness/parent/launch.py)."""
    from harness.parent.allowlist import code_files
    from harness.compile.run import CHILD, CHILD_FILE

    assert CHILD_FILE.is_file() and CHILD == "harness.compile.capture" and CHILD_FILE.stem == "capture"
    held = {path.relative_to(ROOT).as_posix() for path in code_files((CHILD_FILE,)) if path.suffix == ".py"}
    child = {f"harness/compile/{name}.py" for name in ("__init__", "capture", "record", "compiler", "assembly",
                                                       "targets")}
    assert child <= held, sorted(child - held)
    parent = {"harness/compile/run.py", "harness/compile/report.py", "harness/compile/__main__.py",
              "harness/parent/launch.py", "harness/report/store.py", "harness/parent/allowlist.py"}
    assert not held & parent, sorted(held & parent)
