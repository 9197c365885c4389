"""Tables of what the database holds and of the check's self-test: --history, the stored runs,
--compare, a --replay's verdicts, --mode selftest."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from harness.report.cells import MIN_DETAIL, NAME_LIMIT, _detail_room, _natural_width, _notes, _status, _us, short_name
from harness.results import CPU_TIMING_METHOD, ranked


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
# What moves one case's median from one worker process to another beyond its own interval (the
# process's allocation of its buffers, the fence's calibration, the GPU's state), as a standard
# deviation: CASE_SPREAD_US and CASE_SPREAD_REL x the median, in quadrature. Fitted to the spread of
# 32 medians (4 files x 8 cases) over five fenced leaderboards on the H100 (BENCHMARKS.md, ninth
# session); two medians compared always come from two processes (two runs, or two files of one).
CASE_SPREAD_US = 0.36
CASE_SPREAD_REL = 0.0034


def _half_width(us: float, ci: Optional[float]) -> float:
    """A median's 95% half-width in µs for a comparison: its own interval (`ci`, relative) and the
    spread between processes, in quadrature."""
    return math.hypot((ci or 0) * us, 1.96 * math.hypot(CASE_SPREAD_US, CASE_SPREAD_REL * us))


def compare_marks(a_us: float, a_ci: Optional[float], b_us: float, b_ci: Optional[float]) -> str:
    """faster / slower only when the two medians' 95% intervals (their own, `a_ci` / `b_ci` relative,
    each widened by the spread between processes: `_half_width`; medians in µs) do not overlap; "same"
    when they overlap and both are informative, "too noisy" when one's own is wider than ±NOISY_CI."""
    half_a, half_b = _half_width(a_us, a_ci), _half_width(b_us, b_ci)
    lo_a, hi_a, lo_b, hi_b = a_us - half_a, a_us + half_a, b_us - half_b, b_us + half_b
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
    cases only where their verdict changed (harness/cli/bundle.py, `comparison`)."""
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
