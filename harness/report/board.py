"""The leaderboard: submissions in score order with their tie groups, laid out for the width it is
printed at."""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from harness.report.cells import (MIN_DETAIL, NAME_LIMIT, _case_label, _clip, _detail_room,
                                  _failure_reason, _header, _natural_width, _notes, _num, _scan_cut, _scan_text, _us,
                                  short_name)
from harness.results import SubmissionResult, board_order, cpu_timed
from harness.results import ScanResult


RANK_TITLES = {"geom": "geomean µs", "mean": "mean µs", "last": "last case µs"}
# Over a leaderboard of CPU times (results.cpu_timed), in the table and the Markdown export; one line at 80 columns
CPU_BANNER = "Not a GPU ranking: CPU times (Triton kernels in its interpreter), so no ranks."


@dataclasses.dataclass(frozen=True)
class BoardLayout:
    """How much of the leaderboard sits in its main table (one rung of Leaderboard.LAYOUTS)."""

    cases_inline: bool            # one column per benchmark case (else: compact tables under it)
    scan: str                     # "full": classification and pattern names; "short": "2 flags"; "below": no column
    name_limit: Optional[int]     # shorten longer submission names (None: whole)
    detail_inline: bool           # the failure reason, clipped to DETAIL_LINES (else: only below the table)
    interval_inline: bool = True  # the score's 95% interval (and the energy) in columns (else: under the table)


@dataclasses.dataclass(frozen=True)
class _BoardRow:
    rank: str
    name: str
    status: Text
    score: str
    roofline: str
    interval: str                 # the score's 95% interval, "lo–hi" µs ("-" where none)
    energy: str                   # geomean joules per call, as mJ ("-" where none; --energy)
    cases: tuple[Text, ...]
    timed: bool                   # at least one benchmark case has a median
    scan: ScanResult
    detail: str


class Leaderboard:
    """Ranked: passing submissions by the task's ranking (geometric mean of per-case medians by
    default), then failures with their reason. On the CPU (results.cpu_timed) nothing is ranked: no
    rank column, rows by name, and CPU_BANNER over the table. Laid out for the width it is printed
    at: the first of LAYOUTS whose columns fit (numbers and names are never cut; only the detail
    column gives way)."""

    LAYOUTS = (  # richest first; each rung gives up one thing, moved under the table
        BoardLayout(cases_inline=True, scan="full", name_limit=None, detail_inline=True),
        BoardLayout(cases_inline=True, scan="short", name_limit=None, detail_inline=True),
        BoardLayout(cases_inline=True, scan="short", name_limit=NAME_LIMIT, detail_inline=True),
        BoardLayout(cases_inline=False, scan="short", name_limit=None, detail_inline=True),
        BoardLayout(cases_inline=False, scan="short", name_limit=NAME_LIMIT, detail_inline=True),
        BoardLayout(cases_inline=False, scan="short", name_limit=NAME_LIMIT, detail_inline=False),
        BoardLayout(cases_inline=False, scan="below", name_limit=NAME_LIMIT, detail_inline=False),
        BoardLayout(cases_inline=False, scan="below", name_limit=NAME_LIMIT, detail_inline=False,
                    interval_inline=False),
    )

    def __init__(self, results: Sequence[SubmissionResult], label: Callable[[dict], str], device: str,
                 bandwidth: Optional[float] = None, ranking: str = "geom"):
        order = board_order(results, ranking)
        self.cpu = cpu_timed(results)
        bench_cases = next((r.cases for r in results if any(c.kind == "benchmark" for c in r.cases)), [])
        self.columns = [_case_label(c, label) for c in bench_cases if c.kind == "benchmark"]
        indices = [c.index for c in bench_cases if c.kind == "benchmark"]
        if self.cpu:
            self.title = (f"Results on {device} (µs, median time per call on the CPU, by name; on a GPU the table "
                          f"would rank by {RANK_TITLES[ranking]}; ⚠ = a timing warning, see the per-case table or "
                          "exports)")
        else:
            self.title = (f"Leaderboard on {device} (µs, median device time per call; rank by "
                          f"{RANK_TITLES[ranking]}; ⚠ = a timing warning, see the per-case table or exports)")
        if not self.cpu and any(r.score_us(ranking) is not None and not r.verified for r in results):
            self.title += "; u = unverified: timed inside the submission's process, ranked apart"
        if any(rank.startswith("=") for _, rank in order):
            self.title += "; =N: tied, their scores' 95% intervals overlap"
        self.score_title = RANK_TITLES[ranking]
        self.energy = any(r.geomean_energy_j() is not None for r in results)
        self.rows: list[_BoardRow] = []
        for r, rank in order:
            by_case = {(c.kind, c.index): c for c in r.cases}
            cells = []
            for index in indices:
                c = by_case.get(("benchmark", index))
                if c and c.ok and c.device:
                    cells.append(Text.assemble(_us(c.device.median * 1e6), ("⚠" if c.warnings else "", "yellow")))
                else:
                    cells.append(Text("x", style="red") if c else Text("-"))
            score, roof = r.score_us(ranking), r.geomean_roofline(bandwidth)
            interval = r.score_interval_us(ranking) if not self.cpu else None
            joules = r.geomean_energy_j()
            self.rows.append(_BoardRow(
                rank=rank, name=r.name,
                status=Text("pass", style="green") if r.ok else Text("FAIL", style="red"),
                score=_us(score), roofline=_num(roof * 100 if roof else None, "{:.0f}%"),
                interval=f"{_us(interval[0])}–{_us(interval[1])}" if interval else "-",
                energy=_num(joules * 1e3 if joules else None, "{:,.2f}"), cases=tuple(cells),
                timed=any(c.kind == "benchmark" and c.ok and c.device for c in r.cases), scan=r.scan,
                detail=_failure_reason(r, label, markup=False)))

    def _name(self, row: _BoardRow, layout: BoardLayout) -> str:
        return short_name(row.name, layout.name_limit) if layout.name_limit else row.name

    def main_table(self, console: Console, layout: BoardLayout, detail_width: Optional[int]) -> Table:
        """The ranked table; with a detail column `detail_width` cells wide when that is not None."""
        table = Table(title=Text(self.title), title_justify="left")
        if not self.cpu:
            table.add_column("#", justify="right", no_wrap=True)
        table.add_column("submission", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column(_header(self.score_title), justify="right", style="bold", no_wrap=True)
        table.add_column("geomean\n% of BW", justify="right", no_wrap=True)
        intervals = layout.interval_inline and any(row.interval != "-" for row in self.rows)
        if intervals:
            table.add_column("95% CI\nµs", justify="right", no_wrap=True)
        if layout.interval_inline and self.energy:
            table.add_column("geomean\nmJ/call", justify="right", no_wrap=True)
        if layout.cases_inline:
            for title in self.columns:
                table.add_column(title.replace(" ", "\n"), justify="right", no_wrap=True)
        if layout.scan != "below":
            table.add_column("static scan\n(review)" if layout.scan == "full" else "scan\n(review)", no_wrap=True)
        if detail_width is not None:
            table.add_column("detail", width=detail_width, no_wrap=True, overflow="ellipsis")
        for row in self.rows:
            cells = ([] if self.cpu else [row.rank]) + [self._name(row, layout), row.status, row.score, row.roofline]
            cells += ([row.interval] if intervals else []) + ([row.energy] if layout.interval_inline and self.energy
                                                               else [])
            if layout.cases_inline:
                cells += row.cases
            if layout.scan != "below":
                cells.append(_scan_text(row.scan, full=layout.scan == "full"))
            if detail_width is not None:
                cells.append(_clip(console, row.detail, detail_width)[0])
            table.add_row(*cells)
        return table

    def case_tables(self, console: Console, options: ConsoleOptions, layout: BoardLayout) -> list[Table]:
        """The per-case medians as compact tables (submission, then as many cases as fit the width)."""
        rows = [row for row in self.rows if row.timed]
        tables: list[Table] = []
        start = 0
        while rows and start < len(self.columns):
            end = start + 1
            while end < len(self.columns) and _natural_width(
                    console, options, self._case_table(rows, layout, start, end + 1)) <= options.max_width:
                end += 1
            tables.append(self._case_table(rows, layout, start, end))
            start = end
        return tables

    def _case_table(self, rows: Sequence[_BoardRow], layout: BoardLayout, start: int, end: int) -> Table:
        title = ("Per-case median µs (⚠ = a timing warning)" if start == 0 else
                 f"Per-case median µs, continued (cases {start + 1}-{end} of {len(self.columns)})")
        table = Table(title=title, title_justify="left")
        table.add_column("submission", no_wrap=True)
        for title in self.columns[start:end]:
            table.add_column(title.replace(" ", "\n"), justify="right", no_wrap=True)
        for row in rows:
            table.add_row(self._name(row, layout), *row.cases[start:end])
        return table

    def layout(self, console: Console, options: ConsoleOptions) -> tuple[BoardLayout, Optional[int]]:
        """The first of LAYOUTS that fits `options.max_width`, and the width of its detail column."""
        longest = max((cell_len(" ".join(row.detail.split())) for row in self.rows), default=0)
        for layout in self.LAYOUTS:
            room = _detail_room(console, options, self.main_table(console, layout, None))
            if longest and layout.detail_inline:
                if room >= max(len("detail"), min(MIN_DETAIL, longest)):
                    return layout, min(room, max(len("detail"), longest))
            elif room >= -3:  # no detail column: the table alone fits
                return layout, None
        return self.LAYOUTS[-1], None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        layout, detail_width = self.layout(console, options)
        if self.cpu:
            yield Text(CPU_BANNER, style="bold yellow")
        yield self.main_table(console, layout, detail_width)
        if not layout.cases_inline:
            yield from self.case_tables(console, options, layout)
        failures = [(row.name, row.detail) for row in self.rows if row.detail and (
            detail_width is None or _clip(console, row.detail, detail_width)[1])]
        yield from _notes("Why they failed, in full:", failures)
        scans = [(row.name, row.scan.summary()) for row in self.rows if _scan_cut(row.scan, layout.scan)]
        yield from _notes("Static scan, in full (for review: flags never change a verdict):", scans)
        if not layout.interval_inline:
            yield from _notes("95% intervals of the scores, µs" + (" (and geomean mJ per call)" if self.energy else "")
                              + ":", [(row.name, row.interval + (f" ({row.energy} mJ)" if self.energy else ""))
                                      for row in self.rows if row.interval != "-" or row.energy != "-"])
        names = [("", row.name) for row in self.rows if self._name(row, layout) != row.name]
        yield from _notes("Shortened names, in full:", names)


def leaderboard_table(results: Sequence[SubmissionResult], label: Callable[[dict], str], device: str,
                      bandwidth: Optional[float] = None, ranking: str = "geom") -> Leaderboard:
    """The ranked leaderboard, laid out for the width it is printed at (see Leaderboard)."""
    return Leaderboard(results, label, device, bandwidth, ranking)


def one_line(r: SubmissionResult, label: Callable[[dict], str]) -> str:
    """A submission's outcome as it finishes: status, geomean, per-case medians or the reason."""
    if not r.ok:
        return f"{escape(r.name)}: FAIL: {_failure_reason(r, label)}"
    cases = ", ".join(f"{_case_label(c, label)} {_us(c.device.median * 1e6)}" for c in r.cases if c.device)
    return f"{escape(r.name)}: pass, geomean {_us(r.geomean_us())} µs ({cases})"
