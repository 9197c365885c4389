"""One submission's per-case table (test and benchmark modes), laid out for the width it is printed at."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from harness.report.cells import (MIN_DETAIL, NARROW_DROPS, OPTIONAL_COLUMNS, _CASE_COLUMNS, _case_label, _detail_room, _header, _status, case_numbers, fence)
from harness.results import SubmissionResult


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
