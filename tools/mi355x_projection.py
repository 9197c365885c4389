"""A projected MI355X table (issue 17): per benchmark shape and KV format, the least time the
bytes a kernel must move can take at MI355X's peak HBM bandwidth, beside the H200's measured time
and what the gfx950 compile report says of the kernel. A projection, not a measurement: nothing
here ran on an MI355X.

Usage (repo root; both exports optional):
    python tools/mi355x_projection.py [--h200 LEADERBOARD.json] [--compile COMPILE.json]
LEADERBOARD.json: `eval.py --mode leaderboard --json` from a GPU run of the bundled kernels;
COMPILE.json: `eval.py --mode compile --target gfx950 --json` of the same files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import reference  # noqa: E402
from harness.spec import load_task  # noqa: E402

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


def h200_times(path: str | None) -> dict[tuple[str, str], float]:
    """{(submission file stem, case label): median µs} from a leaderboard's JSON export."""
    if not path:
        return {}
    rows = json.loads(Path(path).read_text())["rows"]
    return {(Path(r["submission"]).stem, r["case"]): r["median_us"] for r in rows
            if r.get("kind") == "benchmark" and r.get("case_ok") and r.get("median_us")}


def compile_notes(path: str | None) -> dict[str, str]:
    """{file stem: what gfx950's compile report says of its decode kernel}."""
    if not path:
        return {}
    notes = {}
    for file, rows in json.loads(Path(path).read_text())["submissions"].items():
        main = [r for r in rows if isinstance(r, dict) and r.get("kernel") == DECODE_KERNEL
                and r.get("target") == "gfx950" and r.get("status") == "compiled"] if isinstance(rows, list) else []
        if not main:
            notes[Path(file).stem] = "no gfx950 compile of the decode kernel"
            continue
        waves = min(r["occupancy"] or 0 for r in main)
        spills = max(r.get("scratch_bytes") or 0 for r in main)
        text = f"{waves} wave(s)/SIMD" + (f", {spills} B scratch" if spills else ", no spills")
        if waves < FEW_WAVES:
            text += ": too few waves to hide memory latency, expect well under the floor's bandwidth"
        notes[Path(file).stem] = text
    return notes


def table(h200: dict, notes: dict) -> str:
    spec = load_task(ROOT / "task.yml")
    lines = ["| case | KV format | bytes moved | MI355X floor µs (projection, 8.0 TB/s) | H200 measured µs | "
             "gfx950 compile report (decode kernel) |", "|---|---|---|---|---|---|"]
    for case in spec.cases("benchmark"):
        label = reference.case_label(case.args)
        for fmt, n in bytes_per_case(case.args).items():
            stem = FORMATS[fmt]
            measured = h200.get((stem, label))
            lines.append(f"| {label} | {fmt} | {n / 1e6:.1f} MB | {n / MI355X_BYTES_PER_S * 1e6:.1f} | "
                         f"{'-' if measured is None else f'{measured:.1f}'} | {notes.get(stem, '-')} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--h200", help="leaderboard JSON export from an H200 run")
    parser.add_argument("--compile", help="compile-mode JSON export (gfx950)")
    args = parser.parse_args()
    print("Projection, not a measurement: the MI355X column is bytes / peak bandwidth, a floor no kernel beats.")
    print(table(h200_times(args.h200), compile_notes(args.compile)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
