"""What people see: progress while it runs, tables when it is done (rich)."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.engine import CaseResult, SubmissionResult

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


def submission_table(result: SubmissionResult, label: Callable[[dict], str]) -> Table:
    """Per-case detail for one submission (test / benchmark modes)."""
    timed = any(c.device for c in result.cases)
    table = Table(title=f"{result.name}  ·  static scan: {result.scan.summary()}", title_justify="left")
    table.add_column("case")
    table.add_column("status")
    if timed:
        for col in ("median µs", "mean µs", "std µs", "min µs", "max µs", "runs", "host µs", "sync tail µs"):
            table.add_column(col, justify="right")
    table.add_column("detail", overflow="fold")
    for c in result.cases:
        cells = [f"{c.kind} {_case_label(c, label)}", _status(c.ok)]
        if timed:
            d = c.device.us if c.device else {}
            cells += [_us(d.get(k)) for k in ("median", "mean", "std", "min", "max")]
            cells += [str(c.device.runs) if c.device else "-", _us(c.host.median * 1e6) if c.host else "-",
                      _us(c.tail.median * 1e6) if c.tail else "-"]
        table.add_row(*cells, c.reason)
    return table


def leaderboard_table(results: Sequence[SubmissionResult], label: Callable[[dict], str], device: str) -> Table:
    """Ranked: passing submissions by geomean of per-case medians, then failures with their reason."""
    ranked = sorted(results, key=lambda r: (r.geomean_us() is None, r.geomean_us() or 0.0, r.name))
    bench_cases = next((r.cases for r in results if any(c.kind == "benchmark" for c in r.cases)), [])
    columns = [c for c in bench_cases if c.kind == "benchmark"]
    table = Table(title=f"Leaderboard on {device} (µs, median device time per call; rank by geometric mean)",
                  title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("submission")
    table.add_column("status")
    table.add_column("geomean µs", justify="right", style="bold")
    for c in columns:
        table.add_column(_case_label(c, label), justify="right")
    table.add_column("static scan (review)", overflow="fold")
    table.add_column("detail", overflow="fold")
    for rank, r in enumerate(ranked, 1):
        by_case = {(c.kind, c.index): c for c in r.cases}
        cells = []
        for col in columns:
            c = by_case.get(("benchmark", col.index))
            cells.append(_us(c.device.median * 1e6) if c and c.ok and c.device else "[red]x[/]" if c else "-")
        geo = r.geomean_us()
        table.add_row(str(rank) if geo is not None else "-", r.name, _status(r.ok), _us(geo), *cells,
                      _scan_cell(r), _failure_reason(r, label))
    return table


def one_line(r: SubmissionResult, label: Callable[[dict], str]) -> str:
    """A submission's outcome as it finishes: status, geomean, per-case medians or the reason."""
    if not r.ok:
        return f"{r.name}: FAIL: {_failure_reason(r, label)}"
    cases = ", ".join(f"{_case_label(c, label)} {_us(c.device.median * 1e6)}" for c in r.cases if c.device)
    return f"{r.name}: pass, geomean {_us(r.geomean_us())} µs ({cases})"


def _scan_cell(r: SubmissionResult) -> str:
    text = r.scan.summary()
    return f"[yellow]{text}[/]" if r.scan.flags else text


def _failure_reason(r: SubmissionResult, label: Callable[[dict], str]) -> str:
    if r.error:
        return r.error
    failed = [c for c in r.cases if not c.ok and not c.reason.startswith("not run")]
    if not failed:
        return ""
    first = failed[0]
    more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
    return f"{first.kind} {_case_label(first, label)}: {first.reason}{more}"


def _case_label(c: CaseResult, label: Callable[[dict], str]) -> str:
    return label(c.args) if c.args else c.name


def history_table(rows: Sequence[Any]) -> Table:
    table = Table(title="Best passing result per submission (complete runs)", title_justify="left")
    for col in ("submission", "best geomean µs", "runs", "last run", "device"):
        table.add_column(col, justify="right" if "µs" in col or col == "runs" else "left")
    for row in rows:
        table.add_row(row["name"], _us(row["best_us"]), str(row["runs"]), row["last_run"], row["device"])
    return table


def error(message: str) -> None:
    err_console.print(f"[red]error:[/] {message}", markup=True)


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
