"""Prints, from leaderboard JSON exports, each submission's ranked per-case medians (the parent's
fenced clock) beside the worker's own events (`kernel_us`), with --diagnostics the competition's timing
(`competition_us`) and the host overhead of an isolated call (`host_overhead_us`), and how each ended.
Usage: python lab/fence_table.py RUN.json [RUN.json ...]"""
import json
import sys
from collections import defaultdict


def main() -> None:
    for path in sys.argv[1:]:
        if not __import__("os").path.exists(path):
            print(f"== {path}: missing"); continue
        data = json.load(open(path))
        print(f"== {path}: ranked_by {data['run'].get('ranked_by')}")
        by = defaultdict(list)
        for row in data["rows"]:
            by[row["submission"]].append(row)
        for name, rows in by.items():
            head = rows[0]
            geo = head.get("geomean_us")
            print(f"{name:24s} passed={head['passed']} geomean={geo if geo is None else round(geo, 1)} "
                  f"verified={head.get('timing_verified')} audit={str(head.get('audit'))[:70]!r} error={head['error'][:90]!r}")
            for r in rows:
                if r.get("kind") != "benchmark":
                    if r.get("kind") == "test" and not r.get("case_ok"):
                        print(f"    test {r['case']}: {str(r.get('detail'))[:110]}")
                    continue
                med, ker = r.get("median_us"), r.get("kernel_us")
                ratio = f"{med / ker:.3f}" if med and ker else "-"
                print(f"    {r['case']:>10s} ok={r['case_ok']!s:5s} ranked {med or 0:9.1f} kernel {ker or 0:9.1f} "
                      f"ranked/kernel {ratio:>6s} host {r.get('host_us') or 0:8.1f} runs {r.get('runs')} "
                      + (f"comp {r['competition_us']:8.1f} overhead {r.get('host_overhead_us') or 0:8.1f} "
                         if r.get("competition_us") is not None else "")
                      + ("" if r["case_ok"] else str(r.get("detail"))[:100]))


if __name__ == "__main__":
    main()
