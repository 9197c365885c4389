"""Every number shown, exported: JSON (with every timed call), CSV and Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from harness.worker.channel import markdown_code, markdown_text
from harness.report.board import CPU_BANNER, RANK_TITLES
from harness.report.cells import _case_label, case_numbers
from harness.results import CPU_TIMING_METHOD, SubmissionResult, board_order, cpu_timed, tie_group
from harness.ties import TIE_RULE


# ---------------------------------------------------------------- exports
def export_rows(results: Sequence[SubmissionResult], label: Callable[[dict], str],
                bandwidth: Optional[float], ranking: str = "geom") -> list[dict[str, Any]]:
    """One flat row per submission × case with every number the tables show, in the run's order;
    `rank` as the leaderboard shows it (None on the CPU, where nothing is ranked)."""
    ranks = {id(r): rank for r, rank in board_order(results, ranking)}
    return [row for r in results for row in _result_rows(r, ranks[id(r)], label, bandwidth)]


def _result_rows(r: SubmissionResult, rank: str, label: Callable[[dict], str],
                 bandwidth: Optional[float]) -> list[dict[str, Any]]:
    roof = r.geomean_roofline(bandwidth)
    interval = r.score_interval_us("geom")
    joules = r.geomean_energy_j()
    base = {"rank": rank or None, "tie_group": tie_group(rank), "submission": r.name, "sha256": r.sha256,
            "passed": r.ok, "reads": r.variant,
            "geomean_us": r.geomean_us(), "geomean_ci_low_us": interval[0] if interval else None,
            "geomean_ci_high_us": interval[1] if interval else None,
            "geomean_pct_bandwidth": roof * 100 if roof else None,
            "geomean_energy_mj": joules * 1e3 if joules else None,
            "static_scan": r.scan.summary(), "error": r.error, "sandboxed": r.sandboxed, "audit": r.audit,
            "timing_verified": r.verified,
            "companion": r.companion,
            **{f"seconds_{k.replace(' ', '_')}": round(v, 4) for k, v in r.phases.items()}}
    if not r.cases:
        return [{**base, "kind": None, "case": None}]
    return [{**base, "kind": c.kind, "case": _case_label(c, label), "case_ok": c.ok,
             **case_numbers(c, bandwidth), "warnings": "; ".join(c.warnings), "detail": c.reason,
             "samples_us": [round(x * 1e6, 3) for x in c.samples],
             "launch_bound_calls": [i for i, flag in enumerate(c.caught_up) if flag], "clocks": c.clocks or None}
            for c in r.cases]


JSON_ONLY = ("samples_us", "launch_bound_calls", "clocks")  # lists and objects: in --json, not in the CSV or Markdown


def export_meta(results: Sequence[SubmissionResult], meta: dict[str, Any], ranking: str = "geom") -> dict[str, Any]:
    """The run's facts as the exports write them: `meta`, and what the results themselves say of
    their timing: `cpu_timing` (timed on the CPU: not a GPU ranking, no rank given; `timing` then
    names the CPU clock whatever the run's device) and `ranking` (what ranks, or None)."""
    cpu = cpu_timed(results)
    return {**meta, **({"timing": CPU_TIMING_METHOD} if cpu else {}), "cpu_timing": cpu,
            "ranking": None if cpu else RANK_TITLES[ranking], "ties": None if cpu else TIE_RULE}


def json_document(results: Sequence[SubmissionResult], label: Callable[[dict], str], bandwidth: Optional[float],
                  meta: dict[str, Any], ranking: str = "geom") -> dict[str, Any]:
    """What --json writes (and a replay bundle holds as its results): the run's facts and every row,
    with every timed call's device µs ("samples_us"), the indices of those that waited for launches
    ("launch_bound_calls") and the clock watch's readings ("clocks")."""
    return {"run": export_meta(results, meta, ranking), "rows": export_rows(results, label, bandwidth, ranking)}


def write_exports(results: Sequence[SubmissionResult], label: Callable[[dict], str], bandwidth: Optional[float],
                  meta: dict[str, Any], json_path: Optional[str] = None, csv_path: Optional[str] = None,
                  markdown_path: Optional[str] = None, ranking: str = "geom") -> None:
    """--json (every row, every timed call), --csv (the rows) and --markdown (the rows in the
    leaderboard's order, with its rank column, or on the CPU the banner that nothing is ranked)."""
    import csv
    import json

    doc = json_document(results, label, bandwidth, meta, ranking)
    meta, rows = doc["run"], doc["rows"]
    if json_path:
        Path(json_path).write_text(json.dumps(doc, indent=2, default=str))
    rows = [{k: v for k, v in row.items() if k not in JSON_ONLY} for row in rows]
    if csv_path:
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for row in rows for k in row)))
            writer.writeheader()
            writer.writerows({k: _csv_cell(v) for k, v in row.items()} for row in rows)
    if markdown_path:
        board = [row for r, rank in board_order(results, ranking) for row in _result_rows(r, rank, label, bandwidth)]
        Path(markdown_path).write_text(_markdown(board, meta))


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    """A text cell a spreadsheet would read as a formula (it starts with = + - @, a tab or a carriage
    return) gets a leading apostrophe: a submission's own text reaches these cells."""
    return "'" + value if isinstance(value, str) and value.startswith(_FORMULA_START) else value


def _markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """`rows` (in the leaderboard's order) as one Markdown table under the run's facts; a rank
    column first, except on the CPU (meta `cpu_timing`), where CPU_BANNER says why there is none."""
    energy = any(r.get("energy_mj") is not None for r in rows)
    optional = [k for k in ("kernel_us", "outside_us", "slot_copy_us", "competition_us", "host_overhead_us")
                if any(r.get(k) is not None for r in rows)]
    cols = ([] if meta.get("cpu_timing") else ["rank"]) + ["submission", "passed", "timing_verified", "geomean_us",
            "geomean_ci_us", "geomean_pct_bandwidth", *(["geomean_energy_mj"] if energy else []), "kind", "case",
            "case_ok", "median_us", *optional, "mean_us", "std_us", "min_us", "max_us", "runs", "host_us", "tail_us", "gbps",
            "pct_bandwidth", *(["energy_mj"] if energy else []), "warnings", "detail", "error"]

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
        return "" if v is None else markdown_text(str(v))

    def text(column: str, v: Any) -> str:  # free text that may hold a submission's own words
        return markdown_code(str(v or "")) if column in ("warnings", "detail", "error") else cell(v)

    rows = [{**r, "geomean_ci_us": (f"{cell(r['geomean_ci_low_us'])}–{cell(r['geomean_ci_high_us'])}"
                                    if r.get("geomean_ci_low_us") is not None else None)} for r in rows]

    head = markdown_text(" · ".join(f"{k}: {v}" for k, v in meta.items()))
    lines = [f"Run: {head}", "", *([f"**{CPU_BANNER}**", ""] if meta.get("cpu_timing") else []),
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(text(c, r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"
