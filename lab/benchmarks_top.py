"""Rewrites BENCHMARKS.md's top section ("Current numbers") from one leaderboard export of today's
main, so the section always says which commit, GPU and command its numbers come from. The rest of
BENCHMARKS.md (the lab notebook, one section per device run) is left as it is.

Usage (after a device run of the command the section names, its JSON export fetched here):
    python3 lab/benchmarks_top.py RUN.json [--commit SHA] [--command "..."] [--date YYYY-MM-DD]
--commit defaults to this checkout's HEAD (a device machine's copy may carry a stale .git).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- current numbers: written by lab/benchmarks_top.py; do not edit by hand -->"
END = "<!-- end of current numbers -->"
DEFAULT_COMMAND = ("python3 eval.py --mode leaderboard --sandbox require --submission 'submissions/*.py' "
                   "--json RUN.json")


def _us(x) -> str:
    return "-" if x is None else (f"{x:,.1f}" if x < 1000 else f"{x:,.0f}")


def section(run: dict, commit: str, command: str, date: str) -> str:
    """The Markdown of the top section for one export (`run` as `eval.py --json` writes it)."""
    meta, by = run["run"], defaultdict(list)
    for row in sorted(run["rows"], key=lambda r: (r.get("geomean_us") is None, r.get("geomean_us") or 0)):
        by[row["submission"]].append(row)
    cases = [r["case"] for r in next(iter(by.values())) if r.get("kind") == "benchmark"] if by else []
    lines = [BEGIN, "## Current numbers (read this first)", "",
             f"Commit {commit}, {date}, {meta.get('device')}; torch {meta.get('torch')}, triton {meta.get('triton')}; "
             f"copy bandwidth {meta.get('bandwidth_TBps')} TB/s; timing: {meta.get('timing')}; check: "
             f"{meta.get('check')}; {meta.get('clocks') or 'clocks not watched'}.", "",
             f"Command: `{command}`", "",
             "Median µs per call (the ranked number), rank by geomean; `slot copy` is the part of each fenced "
             "median that is the output's copy to the harness (README, \"Read the table\").", "",
             "| rank | file | geomean µs | " + " | ".join(cases) + " |",
             "|---|---|---|" + "---|" * len(cases)]
    for name, rows in by.items():
        head, bench = rows[0], {r["case"]: r for r in rows if r.get("kind") == "benchmark"}
        cells = [_us(bench[c].get("median_us")) if c in bench and bench[c].get("case_ok") else "fail" for c in cases]
        lines.append(f"| {head.get('rank') or '-'} | {name} | {_us(head.get('geomean_us'))} | " + " | ".join(cells) + " |")
    for name, rows in list(by.items())[:1]:
        copies = {r["case"]: r["slot_copy_us"] for r in rows if r.get("kind") == "benchmark" and r.get("slot_copy_us")}
        if copies:
            lines += ["", f"slot copy µs ({name}): " + ", ".join(f"{c} {_us(v)}" for c, v in copies.items())]
    return "\n".join(lines + ["", END])


def rewrite(text: str, new: str) -> str:
    """`text` with its generated section replaced by `new` (inserted before the first "## " heading
    after the title where there is none yet)."""
    if BEGIN in text and END in text:
        return text[:text.index(BEGIN)] + new + text[text.index(END) + len(END):]
    at = text.index("\n## ") + 1
    return text[:at] + new + "\n\n" + text[at:]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("--commit")
    parser.add_argument("--command", default=DEFAULT_COMMAND)
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    parser.add_argument("--benchmarks", type=Path, default=ROOT / "BENCHMARKS.md")
    args = parser.parse_args(argv)
    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                           text=True).stdout.strip()
    try:
        run = json.loads(args.export.read_text())
    except (OSError, ValueError) as exc:
        print(f"{args.export}: not a leaderboard export ({exc})", file=sys.stderr)
        return 2
    args.benchmarks.write_text(rewrite(args.benchmarks.read_text(), section(run, commit, args.command, args.date)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
