"""Prints, from leaderboard JSON exports: for the first two, each file's per-case ranked medians in
both runs, their ratio, `slot copy µs` and each run's subtracted fence cost (run-to-run agreement);
for the rest, one line per file:
passed or why not, its geomean beside the first file's (the honest control).
Usage: python lab/issue37_table.py RUN1.json RUN2.json [ZOO.json ...]"""
import json
import os
import sys
from collections import defaultdict


def rows_of(path):
    if not os.path.exists(path):
        return None
    by = defaultdict(list)
    for row in json.load(open(path))["rows"]:
        by[row["submission"]].append(row)
    return by


def pair(a, b) -> None:
    worst = 0.0
    print(f"{'file':22s} {'case':>7s} {'run 1':>8s} {'run 2':>8s} {'2/1':>6s} {'copy':>5s} {'events':>7s} {'fence 1':>7s} {'fence 2':>7s}")
    for name, rows in a.items():
        other = {r["case"]: r for r in b.get(name, []) if r.get("kind") == "benchmark"}
        for r in rows:
            o = other.get(r["case"])
            if r.get("kind") != "benchmark" or not o or not r.get("median_us") or not o.get("median_us"):
                continue
            ratio = o["median_us"] / r["median_us"]
            worst = max(worst, abs(ratio - 1))
            copy = r.get("slot_copy_us")
            fences = " ".join("      -" if x.get("fence_us") is None else f"{x['fence_us']:7.1f}" for x in (r, o))
            print(f"{name[:22]:22s} {r['case']:>7s} {r['median_us']:8.1f} {o['median_us']:8.1f} {ratio:6.3f} "
                  f"{'-' if copy is None else f'{copy:5.1f}'} {r.get('kernel_us') or 0:7.1f} {fences}")
    print(f"largest run-to-run difference: {worst * 100:.1f}%")


def outcomes(by) -> None:
    for name, rows in by.items():
        head = rows[0]
        geo = head.get("geomean_us")
        why = head["error"] or next((f"{r['case']}: {r.get('detail')}" for r in rows if not r.get("case_ok")), "")
        print(f"  {name[:26]:26s} {'pass' if head['passed'] else 'FAIL'} "
              f"{'-' if geo is None else f'{geo:7.1f}'}  {str(why)[:150]}")


def main() -> None:
    runs = [rows_of(p) for p in sys.argv[1:]]
    if len(runs) >= 2 and runs[0] and runs[1]:
        pair(runs[0], runs[1])
    for path, by in zip(sys.argv[3:], runs[2:]):
        print(f"== {path}")
        if by:
            outcomes(by)


if __name__ == "__main__":
    main()
