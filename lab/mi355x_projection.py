"""A projected MI355X table (issue 17): per benchmark shape and KV format, the least time the
bytes a kernel must move can take at MI355X's peak HBM bandwidth, beside the H200's measured time
and what the gfx950 compile report says of the kernel. A projection, not a measurement: nothing
here ran on an MI355X.

Usage (repo root; both optional):
    python lab/mi355x_projection.py [--h200 LEADERBOARD.json ...] [--compile triton_fp8=REPORT.json ...]
LEADERBOARD.json: `eval.py --mode leaderboard --json` from a GPU run of the bundled kernels;
REPORT.json: a gfx950 compile report of a file's AMD plan (`python -m harness.compile --json`,
the commands in BENCHMARKS.md session 8) or `eval.py --mode compile --json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import reference  # noqa: E402
from harness.api import load_task  # noqa: E402

MI355X_BYTES_PER_S = 8.0e12   # AMD's figure for the MI355X's HBM3E (peak, not a measured copy)
FORMATS = {"bf16": "triton_bf16", "fp8": "triton_fp8", "mxfp4": "triton_mxfp4"}  # format -> bundled file
FEW_WAVES = 2  # below this many waves per SIMD, little is left to hide memory latency with
DECODE_KERNEL = "_mla_decode_kernel"


def bytes_per_case(args: dict) -> dict[str, int]:
    """reference.bytes_moved for a benchmark case without making its full inputs: the count is
    linear in the sequence length, so two small draws of the same batch give it exactly."""
    small = {k: v for k, v in args.items() if k not in ("seed", "kvseqlen")}
    at = {n: reference.bytes_moved(reference.generate_input(**small, kvseqlen=n, seed=0, device="cpu"))
          for n in (32, 64)}
    per_token = {f: (at[64][f] - at[32][f]) / 32 for f in at[32]}
    return {f: round(at[32][f] + per_token[f] * (args["kvseqlen"] - 32)) for f in FORMATS}


def h200_times(paths: list[str]) -> dict[tuple[str, str], float]:
    """{(submission file stem, case label): median µs} from leaderboards' JSON exports (the first
    export that has a passing case gives its number)."""
    times: dict[tuple[str, str], float] = {}
    for path in paths:
        for r in json.loads(Path(path).read_text())["rows"]:
            if r.get("kind") == "benchmark" and r.get("case_ok") and r.get("median_us"):
                times.setdefault((Path(r["submission"]).stem, r["case"]), r["median_us"])
    return times


def compile_notes(pairs: list[str]) -> dict[str, str]:
    """{file stem: what gfx950's compile report says of its decode kernel}, from FILE_STEM=REPORT
    pairs; REPORT: `python -m harness.compile --json` (a file's GPU plan, --set / --option)
    or `eval.py --mode compile --json` (the kernels as the CPU run launched them)."""
    notes = {}
    for pair in pairs:
        stem, _, path = pair.partition("=")
        doc = json.loads(Path(path).read_text())
        rows = doc if isinstance(doc, list) else [r for rs in doc["submissions"].values() if isinstance(rs, list)
                                                   for r in rs]
        main = [r for r in rows if r.get("kernel") == DECODE_KERNEL and r.get("target") == "gfx950"
                and r.get("status") == "compiled"]
        if not main:
            notes[stem] = "no gfx950 compile of the decode kernel"
            continue
        if any(r.get("occupancy") is None or r.get("vgpr") is None for r in main):
            notes[stem] = "occupancy or registers not in the report"
            continue
        waves = min(r["occupancy"] for r in main)
        spills = max(r.get("scratch_bytes") or 0 for r in main)
        scaled = any("scale" in m for r in main for m in (r.get("matrix") or []))
        text = f"{max(r['vgpr'] for r in main)} VGPRs, {waves} wave(s)/SIMD" + (
            f", {spills} B scratch" if spills else ", no spills") + (", scaled MFMA" if scaled else "")
        if waves < FEW_WAVES:
            text += ": one wave per SIMD leaves little to hide memory latency with"
        notes[stem] = text
    return notes


def table(h200: dict, notes: dict) -> str:
    spec = load_task(ROOT / "task.yml")
    head = " | ".join(f"{f}: MI355X floor / H200" for f in FORMATS)
    lines = [f"| case | {head} |", "|---|" + "---|" * len(FORMATS)]
    for case in spec.cases("benchmark"):
        label = reference.case_label(case.args)
        cells = []
        for fmt, n in bytes_per_case(case.args).items():
            measured = h200.get((FORMATS[fmt], label))
            cells.append(f"{n / MI355X_BYTES_PER_S * 1e6:.1f} / {'-' if measured is None else f'{measured:.1f}'}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {stem} on gfx950 (decode kernel): {note}" for stem, note in notes.items()]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--h200", action="append", default=[], help="leaderboard JSON export from an H200 run "
                        "(repeatable: a case missing from one is taken from the next)")
    parser.add_argument("--compile", action="append", default=[], metavar="FILE_STEM=REPORT",
                        help="a gfx950 compile report's JSON for a bundled file, e.g. triton_mxfp4=mx.json")
    args = parser.parse_args()
    print("Projection, not a measurement: µs per call; MI355X floor = the bytes a kernel must move / 8.0 TB/s "
          "(peak HBM), which no kernel beats; H200 = measured.")
    print(table(h200_times(args.h200), compile_notes(args.compile)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
