"""What people see: progress while it runs, tables when it is done (rich)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.padding import Padding
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from harness.channel import markdown_code, markdown_text
from harness.results import (CPU_TIMING_METHOD, CaseResult, SubmissionResult, board_order, cpu_timed, ranked,
                             tie_group)
from harness.ties import TIE_RULE
from harness.scan import ScanResult

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
        "kernel_us": c.kernel.median * 1e6 if c.kernel else None,  # fenced runs: the worker's own events
        # fenced runs: what the ranked median holds beyond the worker's own events (the output's copy
        # into the slot, the launch gaps of the worker's queued work, the hand-over's spread)
        "outside_us": (d["median"] - c.kernel.median * 1e6) if c.kernel and d.get("median") is not None else None,
        # --diagnostics (the worker's numbers): the competition's timing (its mean), and the wall time of an
        # isolated call (call + synchronize, the GPU idle before it) less the ranked median
        "competition_us": c.competition.mean * 1e6 if c.competition else None,
        "host_overhead_us": (c.isolated.median * 1e6 - d["median"]) if c.isolated and d.get("median") is not None
        else None,
        "energy_mj": c.energy_j * 1e3 if c.energy_j is not None else None,  # --energy: per call, the calls alone
        "energy_err_mj": c.energy_err_j * 1e3 if c.energy_err_j is not None else None,
        "energy_note": c.energy_note or None,
        "sm_mhz_min": (c.clocks.get("sm_mhz") or [None] * 3)[1],  # the clock watch (harness/gpuwatch.py)
        "mem_mhz_min": (c.clocks.get("mem_mhz") or [None] * 3)[1],
        "temp_c_max": c.clocks.get("temp_c_max"), "power_w_max": c.clocks.get("power_w_max"),
        "throttle": ", ".join(c.clocks.get("throttle", [])) or None,
    }


def _num(x: Optional[float], fmt: str = "{:,.0f}") -> str:
    return "-" if x is None else fmt.format(x)


# ---------------------------------------------------------------- tables that fit the terminal
# The leaderboard and the per-case table are renderables that lay themselves out for the width they
# are printed at (`console.print` passes it: a terminal's width, or 200 columns when piped). Every
# column but the last (detail) is no-wrap and sized to its widest cell, so a number or a name is
# never folded or cut; when the width runs short, whole columns move under the table or out to the
# exports instead, and a note says where they went.

NAME_LIMIT = 30   # a longer submission name is shortened, keeping its end, when the width runs short
MIN_DETAIL = 24   # the narrowest useful detail column; any narrower and the reasons go under the table
DETAIL_LINES = 2  # a leaderboard row's failure reason is clipped to this many lines (in full below it)
CUT = "…"


def short_name(name: str, limit: int = NAME_LIMIT) -> str:
    """`name` whole when it has at most `limit` characters, else its start and end (".py") around "…"."""
    if len(name) <= limit:
        return name
    tail = min(10, limit // 3)
    return name[:limit - tail - 1] + CUT + name[-tail:]


def _natural_width(console: Console, options: ConsoleOptions, table: Table) -> int:
    """The width `table` takes when nothing in it wraps."""
    return Measurement.get(console, options.update_width(100_000), table).maximum


def _detail_room(console: Console, options: ConsoleOptions, table: Table) -> int:
    """Cells left for one more (detail) column after `table`'s own: its padding and border taken."""
    return options.max_width - _natural_width(console, options, table) - 3


def _clip(console: Console, text: str, width: int, lines: int = DETAIL_LINES) -> tuple[Text, bool]:
    """`text` on at most `lines` lines of `width` cells, ending in " …" after a whole word when cut
    (never inside a number); and whether it was cut."""
    wrapped = [line.plain.rstrip() for line in Text(" ".join(text.split())).wrap(console, width)]
    kept, cut = wrapped[:lines], len(wrapped) > lines
    if cut:
        last = kept[-1]
        while cell_len(last) + 2 > width and " " in last:
            last = last.rsplit(" ", 1)[0]
        kept[-1] = (last if cell_len(last) + 2 <= width else last[:width - 2]) + " " + CUT
    return Text("\n".join(kept)), cut


def _header(title: str) -> str:
    """A column title on two lines ("sync tail µs" -> "sync" over "tail µs"), split where its widest
    line is narrowest: columns of numbers no wider than their numbers."""
    splits = [(title[:i], title[i + 1:]) for i, ch in enumerate(title) if ch == " "]
    return "\n".join(min(splits, key=lambda two: max(map(len, two)))) if splits else title


def _notes(heading: str, items: Sequence[tuple[str, str]]) -> RenderResult:
    """A heading, then one indented paragraph per (name, text) ("name: text", or the text alone when
    name is empty): what did not fit in a table, in full."""
    if items:
        yield Text(heading, style="dim")
        for name, text in items:
            yield Padding(Text.assemble((name, "bold"), ": ", text) if name else Text(text), (0, 0, 0, 2))


_CASE_COLUMNS = (  # (key, title, format) in display order; NARROW_DROPS says which go first on a narrow terminal
    ("median_us", "median µs", _us), ("kernel_us", "events µs", _us), ("outside_us", "outside events µs", _us),
    ("competition_us", "comp µs", _us), ("host_overhead_us", "host overhead µs", _us),
    ("mean_us", "mean µs", _us), ("std_us", "std µs", _us),
    ("min_us", "min µs", _us), ("max_us", "max µs", _us), ("runs", "runs", _num), ("host_us", "host µs", _us),
    ("tail_us", "sync tail µs", _us), ("gbps", "GB/s", _num),
    ("pct_bandwidth", "% of BW", lambda x: _num(x, "{:.0f}%")), ("audit_us", "audit µs", _us),
    ("energy_mj", "mJ/call", lambda x: _num(x, "{:,.3f}")), ("sm_mhz_min", "SM MHz", _num),
)
OPTIONAL_COLUMNS = ("energy_mj", "sm_mhz_min", "kernel_us", "outside_us", "competition_us", "host_overhead_us")
NARROW_DROPS = ("sm_mhz_min", "tail_us", "host_us", "std_us", "mean_us", "audit_us", "max_us", "min_us", "gbps",
                "runs", "energy_mj", "host_overhead_us", "competition_us", "outside_us", "kernel_us")


class SubmissionTable:
    """Per-case detail for one submission (test / benchmark modes). Narrower than every column, it
    drops the less telling numbers (NARROW_DROPS, in order) rather than fold them; the median and
    the % of bandwidth always stay, and a note names what was dropped."""

    def __init__(self, result: SubmissionResult, label: Callable[[dict], str], bandwidth: Optional[float] = None):
        self.result = result
        self.timed = any(c.device for c in result.cases)
        self.rows = [(f"{c.kind} {_case_label(c, label)}", c.ok, case_numbers(c, bandwidth),
                      escape(c.reason) + "".join(f"\n[yellow]⚠ {escape(w)}[/]" for w in c.warnings)
                      + (f"\n[dim]energy: {escape(c.energy_note)}[/]" if c.energy_note else ""))
                     for c in result.cases]

    def _shown(self, key: str) -> bool:
        """The energy, SM clock and worker's-events columns only where some case has them (--energy; a
        watched GPU; fenced calls)."""
        return (key not in OPTIONAL_COLUMNS
                or any(numbers[key] is not None for _, _, numbers, _ in self.rows))

    def table(self, keys: Sequence[str], detail: bool = True) -> Table:
        r = self.result
        table = Table(title=f"{escape(r.name)}  ·  reads {r.variant or '?'}  ·  static scan: "
                            f"{escape(r.scan.summary())}  ·  {fence(r)}", title_justify="left")
        table.add_column("case", no_wrap=True)
        table.add_column("status", no_wrap=True)
        columns = [col for col in _CASE_COLUMNS if col[0] in keys]
        for _, title, _ in columns:
            table.add_column(_header(title), justify="right", no_wrap=True)
        if detail:
            table.add_column("detail", overflow="fold")
        for case, ok, numbers, text in self.rows:
            cells = [case, _status(ok), *(fmt(numbers[key]) for key, _, fmt in columns)]
            table.add_row(*cells, *([text] if detail else []))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        keys = [key for key, _, _ in _CASE_COLUMNS if self._shown(key)] if self.timed else []
        detail = any(text for *_, text in self.rows)
        for drop in (None, *NARROW_DROPS):
            if drop in keys:
                keys.remove(drop)
            room = _detail_room(console, options, self.table(keys, detail=False))
            if room >= (MIN_DETAIL if detail else -3):
                break
        yield self.table(keys, detail)
        dropped = [title for key, title, _ in _CASE_COLUMNS if self.timed and key not in keys and self._shown(key)]
        if dropped:
            yield Text(f"Not shown at this width: {', '.join(dropped)} (in --json / --csv, or a wider terminal).",
                       style="dim")


def submission_table(result: SubmissionResult, label: Callable[[dict], str],
                     bandwidth: Optional[float] = None) -> SubmissionTable:
    """Per-case detail for one submission (test / benchmark modes), laid out for the width it is printed at."""
    return SubmissionTable(result, label, bandwidth)


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


PHASE_ORDER = ("worker start", "static scan", "inputs", "reference", "calls", "timed device", "check", "energy",
               "audit",
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


def _scan_text(scan: ScanResult, full: bool = True) -> Text:
    """The scan's summary; short: the flag count, or the classification ("unscanned" for any reason)."""
    if full:
        text = scan.summary()
    elif scan.flags:
        text = f"{len(scan.flags)} flag{'s' if len(scan.flags) > 1 else ''}"
    else:
        text = "unscanned" if scan.classification.startswith("not scanned") else scan.classification
    return Text(text, style="yellow" if scan.flags else "")


def _scan_cut(scan: ScanResult, shown: str) -> bool:
    """Whether the scan column (`shown`: "full", "short" or "below") leaves out something worth reading."""
    if shown == "full":
        return False
    if shown == "below":
        return scan.summary() != "clean"
    return bool(scan.flags) or scan.classification not in ("clean", "not scanned")


def _failure_reason(r: SubmissionResult, label: Callable[[dict], str], markup: bool = True) -> str:
    """Why `r` failed: its error, or its first failing case's reason (rich markup escaped unless
    `markup` is False: plain text for a Text cell)."""
    esc = escape if markup else (lambda text: text)
    if r.error:
        return esc(r.error)
    failed = [c for c in r.cases if not c.ok and not c.reason.startswith("not run")]
    if not failed:
        return ""
    first = failed[0]
    more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
    return f"{first.kind} {_case_label(first, label)}: {esc(first.reason)}{more}"


def _case_label(c: CaseResult, label: Callable[[dict], str]) -> str:
    return label(c.args) if c.args else c.name


# ---------------------------------------------------------------- history and self-test, laid out to fit
# As the leaderboard: the richest layout whose tables fit the width they are printed at, else one that
# stacks two values in a cell (two lines per row) rather than fold a number, a name or a date.

def _fits(console: Console, options: ConsoleOptions, tables: Sequence[Table]) -> bool:
    return all(_natural_width(console, options, table) <= options.max_width for table in tables)


def _when(stamp: str) -> str:
    """A stored time (ISO 8601, UTC: "YYYY-MM-DDTHH:MM:SS+00:00") as "YYYY-MM-DD HH:MM:SS"."""
    return stamp[:19].replace("T", " ") if len(stamp) >= 19 and stamp[10:11] == "T" else stamp


def _sandbox(flag: Optional[int], words: bool = False) -> str:
    """A stored sandbox flag: yes / NO (red) / "-" (a run from before the sandbox); as words for a heading."""
    if words:
        return {1: "sandboxed", 0: "[red]UNSANDBOXED[/]"}.get(flag, "sandbox not recorded")
    return {1: "yes", 0: "[red]NO[/]"}.get(flag, "-")


class HistoryTable:
    """--history: per submission file version, the best and the median passing geomean of the stored
    leaderboard runs of one task and check. At a width where one line per version holds every
    column, one table; else one table per device, timing method, shapes and sandbox (named above
    it), one line per version; else two lines per version (its hash under its name, the last run's
    time under its date); else with long names shortened too (in full under the tables)."""

    def __init__(self, rows: Sequence[Any], task: str, check: str):
        self.rows = list(rows)
        self.ranks = self._ranks(self.rows)
        self.title = Text(f"Passing leaderboard results of task {task}, check {check}: per submission version, its "
                          "best geomean (± its 95% interval) and the median of runs, over complete runs of the task's "
                          "own cases (a best far below the median is one lucky run); # ranks the best among versions "
                          "timed alike (device, timing, shapes, sandbox), =N where the intervals overlap, none on "
                          "the CPU")

    @classmethod
    def _ranks(cls, rows: Sequence[Any]) -> dict[int, str]:
        """Each row's rank among the rows timed alike (`sections`' groups), by its best geomean, tied
        where the best runs' 95% intervals overlap (harness/ties.py); "" for CPU-timed rows."""
        out: dict[int, str] = {}
        for _, group in cls._groups(rows).items():
            if group[0]["timing"] == CPU_TIMING_METHOD:
                out.update({id(row): "" for row in group})
                continue
            out.update({id(row): rank for row, rank in ranked(
                group, lambda r: r["best_us"], lambda r: "unverified" not in r["timing"], lambda r: r["name"],
                lambda r: r.get("best_ci_us"))})
        return out

    @staticmethod
    def _plus_minus(row: Any) -> str:
        """The best run's 95% interval as ± its larger half-width, relative to the best ("-" where none)."""
        ci = row.get("best_ci_us")
        if not ci or not row["best_us"]:
            return "-"
        return f"±{max(row['best_us'] - ci[0], ci[1] - row['best_us']) / row['best_us']:.1%}"

    @staticmethod
    def _timing(row: Any) -> str:
        return "CUDA graphs" if row["timing"] == "graph" else row["timing"]

    @staticmethod
    def _shapes(row: Any) -> str:
        return "small shapes" if row["cases"] == "small" else "the task's shapes"

    def wide(self) -> Table:
        table = Table(title=self.title, title_justify="left")
        for col in ("#", "submission", "version", "best geomean µs", "95% CI", "median of runs µs", "runs", "shapes",
                    "timing", "sandbox", "last run (UTC)", "device"):
            table.add_column(col, justify="right" if "µs" in col or col in ("runs", "#", "95% CI") else "left",
                             no_wrap=True)
        for row in self.rows:
            table.add_row(self.ranks[id(row)], escape(row["name"]), row["version"], _us(row["best_us"]),
                          self._plus_minus(row), _us(row["median_us"]),
                          str(row["runs"]), "small" if row["cases"] == "small" else "task", escape(self._timing(row)),
                          _sandbox(row["sandboxed"]), _when(row["last_run"]), escape(row["device"]))
        return table

    @classmethod
    def _groups(cls, rows: Sequence[Any]) -> dict[tuple, list[Any]]:
        """The rows grouped by what makes their numbers comparable: device, timing, shapes, sandbox."""
        groups: dict[tuple, list[Any]] = {}
        for row in rows:
            groups.setdefault((row["device"], cls._timing(row), cls._shapes(row), row["sandboxed"]), []).append(row)
        return groups

    def sections(self) -> list[tuple[str, list[Any]]]:
        """The rows grouped by what makes their numbers comparable, each group with its heading."""
        return [(f"{escape(device)} · {escape(timing)} · {shapes} · {_sandbox(sandboxed, words=True)}", rows)
                for (device, timing, shapes, sandboxed), rows in self._groups(self.rows).items()]

    def section(self, rows: Sequence[Any], stacked: bool, limit: Optional[int]) -> Table:
        table = Table()
        name = (lambda n: short_name(n, limit)) if limit else (lambda n: n)
        if not stacked:  # (stacked: the rank goes under the name, beside the version)
            table.add_column("#", justify="right", no_wrap=True)
        if stacked:
            table.add_column("submission\nversion · rank", no_wrap=True)
        else:
            table.add_column("submission", no_wrap=True)
            table.add_column("version", no_wrap=True)
        table.add_column("best µs\n95% CI" if stacked else "best\nµs", justify="right", no_wrap=True)
        if not stacked:
            table.add_column("95%\nCI", justify="right", no_wrap=True)
        table.add_column("median\nµs", justify="right", no_wrap=True)
        table.add_column("runs", justify="right", no_wrap=True)
        table.add_column("last run\n(UTC)", no_wrap=True)
        for row in rows:
            when = _when(row["last_run"])
            rank = self.ranks[id(row)]
            if stacked:
                first = [f"{escape(name(row['name']))}\n{row['version']}" + (f" · rank {rank}" if rank else ""),
                         f"{_us(row['best_us'])}\n{self._plus_minus(row)}"]
            else:
                first = [rank, escape(name(row["name"])), row["version"], _us(row["best_us"]), self._plus_minus(row)]
            table.add_row(*first, _us(row["median_us"]), str(row["runs"]),
                          when.replace(" ", "\n", 1) if stacked else when)
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.rows:
            yield self.title
            yield Text("None stored yet.", style="dim")
            return
        wide = self.wide()
        if _fits(console, options, [wide]):
            yield wide
            return
        sections = self.sections()
        for stacked, limit in ((False, None), (True, None), (True, NAME_LIMIT)):
            tables = [self.section(rows, stacked, limit) for _, rows in sections]
            if _fits(console, options, tables):
                break
        yield self.title
        for (heading, _), table in zip(sections, tables):
            yield Text.from_markup(heading, style="bold")
            yield table
        if limit:
            yield from _notes("Shortened names, in full:", [("", row["name"]) for row in self.rows
                                                            if short_name(row["name"], limit) != row["name"]])


def history_table(rows: Sequence[Any], task: str, check: str) -> HistoryTable:
    """The best stored leaderboard result per submission version (--history), laid out for the
    width it is printed at."""
    return HistoryTable(rows, task, check)


def command() -> str:
    """How this harness was started, for a hint to type: `mla-eval` when installed so, else `python eval.py`."""
    import sys

    return "mla-eval" if Path(sys.argv[0]).name == "mla-eval" else "python eval.py"


class RunsTable:
    """--mode history: the stored runs, newest first, and the command that compares two of them. One
    line per run where that fits the width, else two (the status under the start, the device under
    the mode, the sandbox under the commit)."""

    def __init__(self, rows: Sequence[Any], db: Optional[str] = None):
        self.rows = list(rows)
        timed = [r["id"] for r in self.rows if r["mode"] in ("benchmark", "leaderboard") and r["status"] == "complete"]
        where = f" --db {db}" if db else ""
        self.hint = (f"{command()} --mode history{where} --compare "
                     + (f"{timed[1]} {timed[0]}" if len(timed) > 1 else "RUN_A RUN_B"))

    def table(self, stacked: bool) -> Table:
        table = Table(title="Runs (newest first)", title_justify="left")
        pairs = [("run", None), ("started (UTC)", "status"), ("mode", "device"), ("commit", "sandbox"),
                 ("passed", None)]
        columns = pairs if stacked else [(a, None) for pair in pairs for a in pair if a is not None]
        for a, b in columns:
            table.add_column(a if b is None else f"{a}\n{b}", no_wrap=True)
        for r in self.rows:
            cells = {"run": str(r["id"]), "started (UTC)": _when(r["started"]), "status": r["status"],
                     "mode": r["mode"], "device": escape(r["device"]), "commit": r["git_commit"] or "-",
                     "sandbox": _sandbox(r["sandboxed"]), "passed": f"{r['passed']}/{r['submissions']}"}
            table.add_row(*(cells[a] if b is None else f"{cells[a]}\n{cells[b]}" for a, b in columns))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = self.table(stacked=False)
        yield wide if _fits(console, options, [wide]) else self.table(stacked=True)
        yield Text("Per-case ratios of two timed runs (B / A):", style="dim")
        yield Padding(Text(self.hint), (0, 0, 0, 2))


def runs_table(rows: Sequence[Any], db: Optional[str] = None) -> RunsTable:
    """The stored runs (--mode history) with the --compare command for two of them (`db`: the
    database to name in it as --db, where given), laid out for the width it is printed at."""
    return RunsTable(rows, db)


NOISY_CI = 0.5  # a median's 95% interval wider than ±50%: an overlap says nothing


def compare_marks(a_us: float, a_ci: Optional[float], b_us: float, b_ci: Optional[float]) -> str:
    """faster / slower only when the two medians' 95% intervals do not overlap; "same" when they
    overlap and both are informative, "too noisy" when one is wider than ±NOISY_CI."""
    lo_a, hi_a = a_us * (1 - (a_ci or 0)), a_us * (1 + (a_ci or 0))
    lo_b, hi_b = b_us * (1 - (b_ci or 0)), b_us * (1 + (b_ci or 0))
    if hi_b < lo_a:
        return "faster"
    if lo_b > hi_a:
        return "slower"
    return "too noisy" if max(a_ci or 0, b_ci or 0) > NOISY_CI else "same"


def compare_table(run_a: int, run_b: int, rows_a: Sequence[Any], rows_b: Sequence[Any]) -> Table:
    """Per (submission, case) in both runs: median A, median B, B/A, and a noise-aware mark. A
    submission is its file's path: a file of the same name elsewhere is another one."""
    by_key = {(r["path"], r["spec"]): r for r in rows_a}
    methods = {"A": {r["timing"] for r in rows_a}, "B": {r["timing"] for r in rows_b}}
    caption = None if any((r["path"], r["spec"]) in by_key for r in rows_b) else \
        "no timed case is in both runs (runs of --mode test have no timings)"
    if caption is None and methods["A"] != methods["B"]:
        caption = (f"the runs were timed differently (A: {', '.join(sorted(methods['A']))}; B: "
                   f"{', '.join(sorted(methods['B']))}): the ratios compare different measurements")
    table = Table(title=f"Run {run_b} against run {run_a} (ratio = B / A of the median; a mark only "
                        "when the 95% intervals of the medians do not overlap)", title_justify="left",
                  caption=escape(caption) if caption else None)
    for col in ("submission", "case", f"A: run {run_a} µs", f"B: run {run_b} µs", "B / A", "mark"):
        table.add_column(col, justify="right" if "µs" in col or col == "B / A" else "left")
    for rb in rows_b:
        ra = by_key.get((rb["path"], rb["spec"]))
        if ra is None:
            continue
        mark = compare_marks(ra["median_us"], ra["ci95_rel"], rb["median_us"], rb["ci95_rel"])
        color = {"faster": "green", "slower": "red", "too noisy": "yellow"}.get(mark, "dim")
        table.add_row(escape(rb["submission"]), rb["label"], _us(ra["median_us"]), _us(rb["median_us"]),
                      f"{rb['median_us'] / ra['median_us']:.3f}", f"[{color}]{mark}[/]")
    return table


def replay_table(rows: Sequence[dict[str, Any]]) -> Table:
    """--replay: per timed case, the bundled and the replayed median, replay / bundle and the mark
    (faster / slower only where the medians' 95% intervals do not overlap), and the verdicts; other
    cases only where their verdict changed (harness/bundle.py, `comparison`)."""
    table = Table(title="Replay against the bundle (ratio = replay / bundle of the median; a mark only when the 95% "
                        "intervals of the medians do not overlap)", title_justify="left")
    for col in ("submission", "case", "bundle µs", "replay µs", "ratio", "mark", "verdict"):
        table.add_column(col, justify="right" if "µs" in col or col == "ratio" else "left", no_wrap=col != "verdict")
    for r in rows:
        changed = r["was"] != r["now"]
        if "mark" not in r and not changed:
            continue
        mark = r.get("mark", "-")
        color = {"faster": "green", "slower": "red", "too noisy": "yellow"}.get(mark, "dim")
        verdict = f"[red]{r['was']} -> {r['now']}[/]" if changed else r["now"]
        table.add_row(escape(r["submission"]), escape(f"{r['kind'] or ''} {r['case'] or ''}".strip()),
                      _us(r.get("a_us")), _us(r.get("b_us")), f"{r['ratio']:.3f}" if "ratio" in r else "-",
                      f"[{color}]{mark}[/]", verdict)
    return table


def error(message: str) -> None:
    # one line whatever its length (a long path must not wrap it): messages may hold [brackets]
    err_console.print(f"[red]error:[/] {escape(message)}", markup=True, soft_wrap=True)


class SelftestTable:
    """--mode selftest: per case, the worst honest output's and the best null model's error / limit,
    and any wrong verdict. One line per case where that fits the width, else two (the case's kind
    over its shape, the honest output over the null model); wrong verdicts in a last column where it
    has room, else under the table."""

    def __init__(self, rows: Sequence[Any], label: Callable[[dict], str], policy: str):
        self.rows = list(rows)
        self.label = label
        self.title = Text(f"Check self-test, policy '{policy}' (ratio = error / limit; pass below 1)")

    def table(self, stacked: bool, wrong_width: Optional[int]) -> Table:
        table = Table(title=self.title, title_justify="left")
        table.add_column("case", no_wrap=True)
        table.add_column("status", no_wrap=True)
        if stacked:
            table.add_column("ratio", justify="right", no_wrap=True)
            table.add_column("worst honest output\nbest null model", no_wrap=True)
        else:
            for col in ("worst\nhonest", "honest path", "best\nnull", "null model"):
                table.add_column(col, justify="left" if " " in col else "right", no_wrap=True)
        if wrong_width is not None:
            table.add_column("wrong verdicts", width=wrong_width, overflow="fold")
        for r in self.rows:
            (honest, honest_name), (null, null_name) = r.worst_honest, r.best_null
            case = f"{r.case.kind}{chr(10) if stacked else ' '}{escape(self.label(r.case.args))}"
            if stacked:
                cells = [case, _status(r.ok), f"{honest:.3f}\n{null:.2f}",
                         f"{escape(honest_name)}\n{escape(null_name)}"]
            else:
                cells = [case, _status(r.ok), f"{honest:.3f}", escape(_without(honest_name, "honest ")), f"{null:.2f}",
                         escape(_without(null_name, "null "))]
            table.add_row(*cells, *([escape(", ".join(r.wrong))] if wrong_width is not None else []))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wrong = [(f"{r.case.kind} {self.label(r.case.args)}", ", ".join(r.wrong)) for r in self.rows if r.wrong]
        longest = max((cell_len(text) for _, text in wrong), default=0)
        least = max(len("wrong verdicts"), min(MIN_DETAIL, longest))  # the narrowest useful column
        for stacked in (False, True):
            bare = self.table(stacked, None)
            room = _detail_room(console, options, bare)
            if room >= (least if wrong else -3):
                break
        inline = bool(wrong) and room >= least
        yield self.table(stacked, min(room, max(len("wrong verdicts"), longest))) if inline else bare
        if not inline:
            yield from _notes("Wrong verdicts (honest outputs that failed, null models that passed):", wrong)


def _without(name: str, prefix: str) -> str:
    return name[len(prefix):] if name.startswith(prefix) else name


def selftest_table(rows: Sequence[Any], label: Callable[[dict], str], policy: str) -> SelftestTable:
    """Margins of the check: honest outputs must stay below 1 (error / limit), nulls above; laid out
    for the width it is printed at."""
    return SelftestTable(rows, label, policy)


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
    optional = [k for k in ("kernel_us", "outside_us", "competition_us", "host_overhead_us")
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
        marks = [compare_marks(base[c.index].device.median, base[c.index].device.ci_rel, c.device.median,
                               c.device.ci_rel)
                 for c in r.cases if c.kind == "benchmark" and c.ok and c.device and c.index in base]
        table.add_row(escape(r.name), f"{base_score / score:.2f}×" if score and base_score else "-",
                      str(marks.count("faster")), str(marks.count("slower")),
                      str(len(marks) - marks.count("faster") - marks.count("slower")))
    return table


def show_finished(mode: str, result: SubmissionResult, label: Callable[[dict], str], n_submissions: int,
                  bandwidth: Optional[float]) -> None:
    """What is printed as each submission finishes (harness/run.py): its table or failure, its
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
