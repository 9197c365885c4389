"""Compile the Gluon kernel (the sm_90 fast path) of triton_fp8.py or triton_mxfp4.py offline, on a machine without a GPU:
registers, spills (ptxas's stack frame), shared memory and the warpgroup MMA instructions, per
setting, and whether the shared memory fits the H200 (232,448 bytes for one program per SM; about
115 KB each for two). Spills are printed, not judged: the fp8 file's 4-warp settings spill 8-152 B.

Usage (repo root; a Triton with Gluon and its NVIDIA backend, e.g. the H200's Triton 3.6 under
PYTHONPATH):
    python lab/sm90_gluon_compile.py [--file fp8|mxfp4] [--splits 1,2] [--stages 2] [--warps 4,8] [--pv-buffers 2]
(mxfp4: its warp-specialized kernel, with the file's decoder settings; --warps 4, its MMA warpgroup)
"""

from __future__ import annotations

import argparse
import itertools
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.api import load_module  # noqa: E402

H200_SHARED_PER_PROGRAM = 232_448
# Per file: the kernel's runtime arguments (Triton signature types) and those a launch sees 16-byte
# aligned (pointers, and strides divisible by 16) for the benchmark shapes.
SIGNATURES = {
    "fp8": dict(q_ptr="*bf16", kv_ptr="*fp8e4nv", qo_indptr_ptr="*i32", kv_indptr_ptr="*i32", out_ptr="*bf16",
                part_out_ptr="*fp32", part_lse_ptr="*fp32", kv_scale_ptr="*fp32", qk_scale="fp32",
                q_amax_ptr="*fp32", q_amax_parts="i32", stride_q_row="i32", stride_q_head="i32",
                stride_kv_row="i32"),
    "mxfp4": dict(q_ptr="*bf16", packed_ptr="*u8", scale_ptr="*u8", qo_indptr_ptr="*i32", kv_indptr_ptr="*i32",
                  out_ptr="*bf16", part_out_ptr="*fp32", part_lse_ptr="*fp32", qk_scale="fp32",
                  stride_q_row="i32", stride_q_head="i32", stride_packed_row="i32", stride_scale_row="i32"),
}
UNALIGNED = ("qk_scale", "q_amax_parts", "stride_scale_row")   # the mxfp4 exponents' row stride is 24


def compile_one(kernel, signature_args: dict, constexprs: dict, num_warps: int) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    names = list(kernel.arg_names)
    assert names == list(signature_args) + [name for name in names if name in constexprs], names
    signature = {**signature_args, **{name: "constexpr" for name in constexprs}}
    consts = {(names.index(name),): value for name, value in constexprs.items()}
    attrs = {(names.index(name),): [["tt.divisibility", 16]] for name in signature_args if name not in UNALIGNED}
    compiled = triton.compile(GluonASTSource(kernel, signature, consts, attrs), target=GPUTarget("cuda", 90, 32),
                              options=dict(num_warps=num_warps))
    ptx = compiled.asm["ptx"]
    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        info = subprocess.run([str(ptxas), "-arch=sm_90a", "-v", f.name, "-o", "/dev/null"],
                              capture_output=True, text=True).stderr
    regs = re.search(r"Used (\d+) registers", info)
    stack = re.search(r"(\d+) bytes stack frame", info)
    return dict(shared=int(compiled.metadata.shared), registers=int(regs.group(1)) if regs else None,
                stack=int(stack.group(1)) if stack else None,
                mma=sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.([\w.]+)", ptx))))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--file", choices=sorted(SIGNATURES), default="fp8")
    parser.add_argument("--splits", default="1,2")
    parser.add_argument("--stages", default="2")
    parser.add_argument("--warps", default="4,8")
    parser.add_argument("--pv-buffers", default="2")
    args = parser.parse_args()
    module = load_module(str(ROOT / "submissions" / f"triton_{args.file}.py"), "sm90_compile")
    if module.gluon is None:
        raise SystemExit("this Triton has no Gluon")
    ints = lambda text: [int(x) for x in text.split(",")]  # noqa: E731
    print("| splits | stages | warps | P.V buffers | shared B | registers | spilled B | warpgroup MMAs |")
    print("|---|---|---|---|---|---|---|---|")
    for splits, stages, warps, buffers in itertools.product(ints(args.splits), ints(args.stages),
                                                            ints(args.warps), ints(args.pv_buffers)):
        if args.file == "mxfp4":   # warp-specialized: --warps is its MMA warpgroup's (4); registers are the
            kernel = module._mla_decode_sm90_ws_kernel   # program's at entry, before setmaxnreg splits them
            constexprs = dict(Q_GROUPS=1, NUM_SPLITS=splits, BLOCK_N=64, STAGES=stages, NBUF=buffers,
                              DECODE_ROWS=module.SM90_DECODE_ROWS, DECODER_WARPS=module.SM90_DECODER_WARPS,
                              DECODER_REGS=module.SM90_DECODER_REGS, EARLY_RELEASE=module.SM90_EARLY_RELEASE)
        else:
            kernel = module._mla_decode_sm90_kernel
            constexprs = dict(NUM_SPLITS=splits, BLOCK_N=64, STAGES=stages, W=warps, AMAX_PARTS=32,
                              PV_BUFFERS=buffers)
        row = compile_one(kernel, SIGNATURES[args.file], constexprs, warps)
        fits = "" if row["shared"] <= H200_SHARED_PER_PROGRAM else " (over the H200's limit)"
        print(f"| {splits} | {stages} | {warps} | {buffers} | {row['shared']:,}{fits} | {row['registers']} | "
              f"{row['stack']} | {', '.join(row['mma'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
