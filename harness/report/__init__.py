"""What people see: progress while it runs, tables when it is done (rich)."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from rich.cells import chop_cells
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from harness.report.board import CPU_BANNER, leaderboard_table, one_line
from harness.report.case_table import submission_table
from harness.report.cells import NAME_LIMIT, _us, case_numbers, fence, phase_line, short_name
from harness.report.exports import export_rows, json_document, write_exports
from harness.report.history import (command, compare_marks, compare_table, history_table, replay_table, runs_table,
                                    selftest_table)
from harness.results import SubmissionResult

__all__ = ["CPU_BANNER", "LiveProgress", "NAME_LIMIT", "baseline_table", "case_numbers", "command", "compare_marks",
           "compare_table", "console", "err_console", "error", "escape", "export_rows", "fence", "history_table",
           "json_document", "leaderboard_table", "one_line", "phase_line", "replay_table", "runs_table",
           "selftest_table", "short_name", "show_finished", "submission_table", "write_exports", "_us"]

# Wide tables stay readable when piped to a file or a CI log (rich would wrap at 80 columns).
# emoji=False: rich would turn ":white_check_mark:" in a submission's text into a pictogram
console = Console(highlight=False, emoji=False, width=None if Console().is_terminal else 200)
err_console = Console(stderr=True, highlight=False, emoji=False, width=None if Console(stderr=True).is_terminal else 200)


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




def error(message: str) -> None:
    # one line whatever its length (a long path must not wrap it): messages may hold [brackets]
    err_console.print(f"[red]error:[/] {escape(message)}", markup=True, soft_wrap=True)




def baseline_table(results: Sequence[SubmissionResult], baseline: SubmissionResult, label: Callable[[dict], str],
                   ranking: str = "geom") -> Table:
    """Speedup of each submission over `baseline` (one of the run's): the ratio of the ranking's
    numbers, and per case how many are faster or slower beyond the 95% intervals of the medians."""
    table = Table(title=f"Speedup over {escape(baseline.name)} (baseline µs / submission µs; cases marked only "
                        "when the 95% intervals of the medians do not overlap)", title_justify="left")
    for col in ("submission", "speedup", "faster cases", "slower cases", "same or too noisy"):
        table.add_column(col, justify="left" if col == "submission" else "right")
    base = {c.index: c for c in baseline.cases if c.kind == "benchmark" and c.ok and c.device}
    for r in results:
        if r is baseline:
            continue
        score, base_score = r.score_us(ranking), baseline.score_us(ranking)
        marks = [compare_marks(base[c.index].device.median * 1e6, base[c.index].device.ci_rel, c.device.median * 1e6,
                               c.device.ci_rel)
                 for c in r.cases if c.kind == "benchmark" and c.ok and c.device and c.index in base]
        table.add_row(escape(r.name), f"{base_score / score:.2f}×" if score and base_score else "-",
                      str(marks.count("faster")), str(marks.count("slower")),
                      str(len(marks) - marks.count("faster") - marks.count("slower")))
    return table


def show_finished(mode: str, result: SubmissionResult, label: Callable[[dict], str], n_submissions: int,
                  bandwidth: Optional[float]) -> None:
    """What is printed as each submission finishes (harness/cli/run.py): its table or failure, its
    one-line standing in a leaderboard of several, the companion verdict, the timing fence, where
    its log is, and where its time went."""
    if mode == "profile":
        for c in result.cases:
            console.rule(f"{escape(result.name)} · {label(c.args)}")
            if c.profile:  # the worker's own text (it can write anything there): every line behind a gutter,
                # and cut to the terminal's width here, so the terminal never wraps a row past the gutter
                width = max(20, console.width - 2)
                rows = [row for line in c.profile.splitlines() for row in (chop_cells(line, width) or [""])]
                console.print(Text("\n").join(Text.assemble(("│ ", "dim"), row) for row in rows), soft_wrap=True)
            else:
                console.print(f"[red]{escape(c.reason)}[/]")
    if mode in ("test", "benchmark", "profile") or n_submissions == 1:
        if result.error:
            console.print(f"[red]FAIL[/] {escape(result.name)}: {escape(result.error)}")
        else:
            console.print(submission_table(result, label, bandwidth))
    if mode == "leaderboard" and n_submissions > 1:
        err_console.print(one_line(result, label))
    if result.companion:
        err_console.print(f"  {escape(result.companion)}", highlight=False)
    if mode in ("benchmark", "leaderboard"):
        err_console.print(f"  {fence(result)}")
    if not result.ok:
        err_console.print(f"  worker log: {result.log}")
    err_console.print(phase_line(result), highlight=False)
