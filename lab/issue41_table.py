"""Issue 41's acceptance from a device run's files (lab/gpu_issue41.sh): per seed each file's rank,
geomean and its 95% interval; rank disagreements between runs that the tie groups do not explain;
whether the 3% copy ranked strictly behind its original every time; the --compare and --replay marks;
the clock lines; joules per call per case.
Usage: python3 lab/issue41_table.py OUTDIR ORIGINAL COPY3"""
import glob
import itertools
import json
import os
import re
import sys


def boards(out: str) -> list[tuple[str, dict]]:
    """(seed, {submission: first row}) of every seed_*.json."""
    found = []
    paths = [p for p in glob.glob(os.path.join(out, "seed_*.json")) if not p.endswith(".bundle.json")]
    for path in sorted(paths, key=lambda p: int(re.findall(r"seed_(\d+)", p)[0])):
        rows = json.load(open(path))["rows"]
        found.append((re.findall(r"seed_(\d+)", path)[0], {r["submission"]: r for r in rows}))
    return found


def order(a: dict, b: dict) -> int:
    """-1 / 1 where a ranks strictly before / after b (different tie groups), 0 where tied or unranked."""
    if not a.get("tie_group") or not b.get("tie_group") or a["tie_group"] == b["tie_group"]:
        return 0
    return -1 if a["geomean_us"] < b["geomean_us"] else 1


def main() -> None:
    out, original, copy = sys.argv[1:4]
    runs = boards(out)
    names = sorted({n for _, b in runs for n in b})
    print("--- ranks per seed: rank geomean [95% interval] µs")
    print("seed   " + "  ".join(f"{n[:26]:>34s}" for n in names))
    for seed, board in runs:
        cells = []
        for n in names:
            r = board.get(n)
            cells.append(f"{'-':>34s}" if r is None or r["geomean_us"] is None else
                         (f"{r['rank']:>4s} {r['geomean_us']:7.2f} "
                          f"[{r['geomean_ci_low_us']:.2f}, {r['geomean_ci_high_us']:.2f}]").rjust(34))
        print(f"{seed:6s} " + "  ".join(cells))
    for n in names:  # how far one file's geomean moved between runs, against its intervals' half-width
        seen = [b[n] for _, b in runs if n in b and b[n]["geomean_us"]]
        if len(seen) > 1:
            values = [r["geomean_us"] for r in seen]
            half = max((r["geomean_ci_high_us"] - r["geomean_ci_low_us"]) / 2 / r["geomean_us"] for r in seen)
            print(f"  {n}: geomean spread over runs {max(values) / min(values) - 1:.2%}, widest interval ±{half:.2%}")
    clashes = 0
    for (s1, b1), (s2, b2) in itertools.combinations(runs, 2):
        for x, y in itertools.combinations(names, 2):
            if x in b1 and y in b1 and x in b2 and y in b2 and order(b1[x], b1[y]) * order(b2[x], b2[y]) < 0:
                clashes += 1
                print(f"  disagreement: seeds {s1} / {s2}: {x} vs {y}")
    print(f"rank disagreements not explained by tie groups: {clashes} (over {len(runs)} runs)")
    behind = [b[copy]["tie_group"] != b[original]["tie_group"] and b[copy]["geomean_us"] > b[original]["geomean_us"]
              for _, b in runs if copy in b and original in b]
    print(f"{copy} strictly behind {original}: {sum(behind)} of {len(behind)} runs; geomean ratios "
          + ", ".join(f"{b[copy]['geomean_us'] / b[original]['geomean_us']:.3f}" for _, b in runs if copy in b))
    for label in ("compare", "replay", "plus10"):
        for path in sorted(glob.glob(os.path.join(out, f"{label}*.txt"))):
            text = open(path).read()
            marks = re.findall(r"│ (same|faster|slower|too noisy)\s+│", text)
            summary = [line for line in text.splitlines() if line.startswith(("replay:", "error:"))]
            print(f"--- {os.path.basename(path)}: " + ", ".join(f"{marks.count(m)} {m}" for m in
                                                         ("same", "faster", "slower", "too noisy")) +
                  (f"; {summary[-1]}" if summary else ""))
    print("--- clocks")
    for path in sorted(glob.glob(os.path.join(out, "*.txt"))):
        for line in open(path):
            if line.startswith(("clocks ", "clock watch")):
                print(f"{os.path.basename(path)}: {line.strip()}")
    energy = os.path.join(out, "energy.json")
    if os.path.exists(energy):
        print("--- energy per call (mJ, ± bound) and median µs")
        for r in json.load(open(energy))["rows"]:
            if r.get("kind") == "benchmark":
                mj = f"{r['energy_mj']:.3f} ± {r['energy_err_mj']:.3f}" if r.get("energy_mj") is not None else \
                    str(r.get("energy_note"))[:80]
                print(f"{r['submission']:18s} {r['case']:>8s} {r.get('median_us') or 0:9.1f} µs  {mj}  "
                      f"SM min {r.get('sm_mhz_min')} MHz  max {r.get('power_w_max')} W {r.get('temp_c_max')} °C")


if __name__ == "__main__":
    main()
