"""What people see: progress while it runs, tables when it is done (rich)."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from rich.markup import escape
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.results import CaseResult, SubmissionResult

# Wide tables stay readable when piped to a file or a CI log (rich would wrap at 80 columns).
console = Console(highlight=False, width=None if Console().is_terminal else 200)
err_console = Console(stderr=True, highlight=False, width=None if Console(stderr=True).is_terminal else 200)


class LiveProgress:
    """A progress bar for one submission's cases, and one for the calls of the current case."""

    def __init__(self, label: str, total_cases: int, enabled: bool = True):
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=err_console, transient=True, disable=not enabled)
        self.cases = self.bar.add_task(label, total=total_cases)
        self.calls: Optional[int] = None

    def __enter__(self) -> "LiveProgress":
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.__exit__(*exc)

    def __call__(self, event: str, **info: Any) -> None:
        if event == "case_start":
            if self.calls is not None:
                self.bar.remove_task(self.calls)
            self.calls = self.bar.add_task(f"  {info['action']} {info['case'].name}", total=None)
        elif event == "call" and self.calls is not None:
            self.bar.update(self.calls, completed=info["done"], total=info["total"])
        elif event == "case_end":
            self.bar.advance(self.cases)


def _us(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:,.1f}" if x < 1000 else f"{x:,.0f}"


def _status(ok: bool) -> str:
    return "[green]pass[/]" if ok else "[red]FAIL[/]"


def case_numbers(c: CaseResult, bandwidth: Optional[float]) -> dict[str, Any]:
    """Every number shown for a case, in one place (tables and exports read it)."""
    d = c.device.us if c.device else {}
    gbps = c.bytes / c.device.median / 1e9 if c.device and c.bytes else None
    return {
        "median_us": d.get("median"), "mean_us": d.get("mean"), "std_us": d.get("std"),
        "min_us": d.get("min"), "max_us": d.get("max"), "runs": c.device.runs if c.device else None,
        "ci95_rel": c.device.ci_rel if c.device else None,
        "host_us": c.host.median * 1e6 if c.host else None, "tail_us": c.tail.median * 1e6 if c.tail else None,
        "bytes": c.bytes, "gbps": gbps,
        "pct_bandwidth": gbps * 1e9 / bandwidth * 100 if gbps and bandwidth else None,
        "audit_us": c.audit_s * 1e6 if c.audit_s is not None else None,
    }


def _num(x: Optional[float], fmt: str = "{:,.0f}") -> str:
    return "-" if x is None else fmt.format(x)


def submission_table(result: SubmissionResult, label: Callable[[dict], str],
                     bandwidth: Optional[float] = None) -> Table:
    """Per-case detail for one submission (test / benchmark modes)."""
    timed = any(c.device for c in result.cases)
    table = Table(title=f"{escape(result.name)}  ·  reads {result.variant or '?'}  ·  static scan: {result.scan.summary()}"
                        f"  ·  {fence(result)}", title_justify="left")
    table.add_column("case")
    table.add_column("status")
    if timed:
        for col in ("median µs", "mean µs", "std µs", "min µs", "max µs", "runs", "host µs", "sync tail µs",
                    "GB/s", "% of BW", "audit µs"):
            table.add_column(col, justify="right")
    table.add_column("detail", overflow="fold")
    for c in result.cases:
        cells = [f"{c.kind} {_case_label(c, label)}", _status(c.ok)]
        if timed:
            n = case_numbers(c, bandwidth)
            cells += [_us(n[k]) for k in ("median_us", "mean_us", "std_us", "min_us", "max_us")]
            cells += [_num(n["runs"]), _us(n["host_us"]), _us(n["tail_us"]), _num(n["gbps"]),
                      _num(n["pct_bandwidth"], "{:.0f}%"), _us(n["audit_us"])]
        detail = escape(c.reason) + "".join(f"\n[yellow]⚠ {escape(w)}[/]" for w in c.warnings)
        table.add_row(*cells, detail)
    return table


RANK_TITLES = {"geom": "geomean µs", "mean": "mean µs", "last": "last case µs"}


def leaderboard_table(results: Sequence[SubmissionResult], label: Callable[[dict], str], device: str,
                      bandwidth: Optional[float] = None, ranking: str = "geom") -> Table:
    """Ranked: passing submissions by the task's ranking (geometric mean of per-case medians by
    default), then failures with their reason."""
    ranked = sorted(results, key=lambda r: (r.score_us(ranking) is None, r.score_us(ranking) or 0.0, r.name))
    bench_cases = next((r.cases for r in results if any(c.kind == "benchmark" for c in r.cases)), [])
    columns = [c for c in bench_cases if c.kind == "benchmark"]
    table = Table(title=f"Leaderboard on {device} (µs, median device time per call; rank by {RANK_TITLES[ranking]}; "
                        "⚠ = noisy, see the per-case table or exports)", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("submission")
    table.add_column("status")
    table.add_column(RANK_TITLES[ranking], justify="right", style="bold")
    table.add_column("geomean % of BW", justify="right")
    for c in columns:
        table.add_column(_case_label(c, label), justify="right")
    table.add_column("static scan (review)", overflow="fold")
    table.add_column("detail", overflow="fold")
    for rank, r in enumerate(ranked, 1):
        by_case = {(c.kind, c.index): c for c in r.cases}
        cells = []
        for col in columns:
            c = by_case.get(("benchmark", col.index))
            mark = "[yellow]⚠[/]" if c and c.warnings else ""
            cells.append(_us(c.device.median * 1e6) + mark if c and c.ok and c.device else "[red]x[/]" if c else "-")
        geo, roof = r.score_us(ranking), r.geomean_roofline(bandwidth)
        table.add_row(str(rank) if geo is not None else "-", escape(r.name), _status(r.ok), _us(geo),
                      _num(roof * 100 if roof else None, "{:.0f}%"), *cells, _scan_cell(r), _failure_reason(r, label))
    return table


def one_line(r: SubmissionResult, label: Callable[[dict], str]) -> str:
    """A submission's outcome as it finishes: status, geomean, per-case medians or the reason."""
    if not r.ok:
        return f"{escape(r.name)}: FAIL: {_failure_reason(r, label)}"
    cases = ", ".join(f"{_case_label(c, label)} {_us(c.device.median * 1e6)}" for c in r.cases if c.device)
    return f"{escape(r.name)}: pass, geomean {_us(r.geomean_us())} µs ({cases})"


PHASE_ORDER = ("worker start", "static scan", "inputs", "reference", "calls", "timed device", "check", "audit",
               "audit start", "audit inputs", "audit reference", "audit calls", "audit check", "audit report")


def fence(r: SubmissionResult) -> str:
    """Whether the worker was sandboxed and what the timing audit found, in a few words."""
    where = "sandboxed" if r.sandboxed else "[bold red]UNSANDBOXED[/]"
    return f"{where}  ·  {r.audit}"


def phase_line(r: SubmissionResult) -> str:
    """Where an evaluation's wall time went, in the parent: one line."""
    if not r.phases:
        return ""
    parts = [f"{name} {r.phases[name]:.2f}" for name in PHASE_ORDER if name in r.phases]
    return f"{escape(r.name)}: {r.phases.get('total', 0.0):.1f} s = " + " · ".join(parts) + " s"


def _scan_cell(r: SubmissionResult) -> str:
    text = r.scan.summary()
    return f"[yellow]{text}[/]" if r.scan.flags else text


def _failure_reason(r: SubmissionResult, label: Callable[[dict], str]) -> str:
    if r.error:
        return escape(r.error)
    failed = [c for c in r.cases if not c.ok and not c.reason.startswith("not run")]
    if not failed:
        return ""
    first = failed[0]
    more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
    return f"{first.kind} {_case_label(first, label)}: {escape(first.reason)}{more}"


def _case_label(c: CaseResult, label: Callable[[dict], str]) -> str:
    return label(c.args) if c.args else c.name


def history_table(rows: Sequence[Any]) -> Table:
    table = Table(title="Best passing result per submission (complete runs)", title_justify="left")
    for col in ("submission", "best geomean µs", "runs", "last run", "device"):
        table.add_column(col, justify="right" if "µs" in col or col == "runs" else "left")
    for row in rows:
        table.add_row(row["name"], _us(row["best_us"]), str(row["runs"]), row["last_run"], row["device"])
    return table


def runs_table(rows: Sequence[Any]) -> Table:
    table = Table(title="Runs (newest first)", title_justify="left")
    for col in ("run", "started", "status", "mode", "device", "commit", "sandbox", "passed"):
        table.add_column(col)
    for r in rows:
        fence = {1: "yes", 0: "[red]NO[/]"}.get(r["sandboxed"], "-")  # "-": a run from before the sandbox
        table.add_row(str(r["id"]), r["started"], r["status"], r["mode"], r["device"], r["git_commit"] or "-",
                      fence, f"{r['passed']}/{r['submissions']}")
    return table


def compare_marks(a_us: float, a_ci: Optional[float], b_us: float, b_ci: Optional[float]) -> str:
    """faster / slower only when the two medians' 95% intervals do not overlap."""
    lo_a, hi_a = a_us * (1 - (a_ci or 0)), a_us * (1 + (a_ci or 0))
    lo_b, hi_b = b_us * (1 - (b_ci or 0)), b_us * (1 + (b_ci or 0))
    if hi_b < lo_a:
        return "faster"
    if lo_b > hi_a:
        return "slower"
    return "same"


def compare_table(run_a: int, run_b: int, rows_a: Sequence[Any], rows_b: Sequence[Any]) -> Table:
    """Per (submission, case) in both runs: median A, median B, B/A, and a noise-aware mark."""
    by_key = {(r["submission"], r["spec"]): r for r in rows_a}
    table = Table(title=f"Run {run_b} against run {run_a} (ratio = B / A of the median; a mark only "
                        "when the 95% intervals of the medians do not overlap)", title_justify="left")
    for col in ("submission", "case", f"A: run {run_a} µs", f"B: run {run_b} µs", "B / A", "mark"):
        table.add_column(col, justify="right" if "µs" in col or col == "B / A" else "left")
    for rb in rows_b:
        ra = by_key.get((rb["submission"], rb["spec"]))
        if ra is None:
            continue
        mark = compare_marks(ra["median_us"], ra["ci95_rel"], rb["median_us"], rb["ci95_rel"])
        color = {"faster": "green", "slower": "red"}.get(mark, "dim")
        table.add_row(rb["submission"], rb["spec"], _us(ra["median_us"]), _us(rb["median_us"]),
                      f"{rb['median_us'] / ra['median_us']:.3f}", f"[{color}]{mark}[/]")
    return table


def error(message: str) -> None:
    err_console.print(f"[red]error:[/] {escape(message)}", markup=True)  # messages may hold [brackets]


def selftest_table(rows: Sequence[Any], label: Callable[[dict], str], policy: str) -> Table:
    """Margins of the check: honest outputs must stay below 1 (error / limit), nulls above."""
    table = Table(title=f"Check self-test, policy '{policy}' (ratio = error / limit; pass below 1)",
                  title_justify="left")
    for col in ("case", "status", "worst honest", "honest path", "best null", "null model", "wrong verdicts"):
        table.add_column(col, justify="right" if col in ("worst honest", "best null") else "left")
    for r in rows:
        table.add_row(f"{r.case.kind} {label(r.case.args)}", _status(r.ok), f"{r.worst_honest[0]:.3f}",
                      r.worst_honest[1], f"{r.best_null[0]:.2f}", r.best_null[1], ", ".join(r.wrong))
    return table


# ---------------------------------------------------------------- exports
def export_rows(results: Sequence[SubmissionResult], label: Callable[[dict], str],
                bandwidth: Optional[float]) -> list[dict[str, Any]]:
    """One flat row per submission × case with every number the tables show."""
    rows = []
    for r in results:
        roof = r.geomean_roofline(bandwidth)
        base = {"submission": r.name, "sha256": r.sha256, "passed": r.ok, "reads": r.variant,
                "geomean_us": r.geomean_us(), "geomean_pct_bandwidth": roof * 100 if roof else None,
                "static_scan": r.scan.summary(), "error": r.error, "sandboxed": r.sandboxed, "audit": r.audit,
                **{f"seconds_{k.replace(' ', '_')}": round(v, 4) for k, v in r.phases.items()}}
        if not r.cases:
            rows.append({**base, "kind": None, "case": None})
        for c in r.cases:
            rows.append({**base, "kind": c.kind, "case": _case_label(c, label), "case_ok": c.ok,
                         **case_numbers(c, bandwidth), "warnings": "; ".join(c.warnings), "detail": c.reason})
    return rows


def write_exports(results: Sequence[SubmissionResult], label: Callable[[dict], str], bandwidth: Optional[float],
                  meta: dict[str, Any], json_path: Optional[str] = None, csv_path: Optional[str] = None,
                  markdown_path: Optional[str] = None) -> None:
    import csv
    import json
    from pathlib import Path

    rows = export_rows(results, label, bandwidth)
    if json_path:
        Path(json_path).write_text(json.dumps({"run": meta, "rows": rows}, indent=2, default=str))
    if csv_path:
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for row in rows for k in row)))
            writer.writeheader()
            writer.writerows(rows)
    if markdown_path:
        Path(markdown_path).write_text(_markdown(rows, meta))


def _markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    cols = ["submission", "passed", "geomean_us", "geomean_pct_bandwidth", "kind", "case", "case_ok",
            "median_us", "mean_us", "std_us", "min_us", "max_us", "runs", "host_us", "tail_us", "gbps",
            "pct_bandwidth", "warnings", "detail"]

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
        return "" if v is None else str(v).replace("|", "\\|")

    head = " · ".join(f"{k}: {v}" for k, v in meta.items())
    lines = [f"Run: {head}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"
