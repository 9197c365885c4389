"""Cells and columns shared by the report's tables and exports: number formats, a case's numbers,
fitting tables to the terminal's width, a submission's timing, phases, scan flags and failure reason."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from harness.results import CaseResult, SubmissionResult
from harness.results import ScanResult


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
        # fenced runs: the ranked median less the worker's event-timed calls (the output's copy into the
        # slot, the hand-over's spread, and the worker's events' own error)
        "outside_us": (d["median"] - c.kernel.median * 1e6) if c.kernel and d.get("median") is not None else None,
        # fenced runs: the output's copy into the slot, inside the ranked median (measured by the fence)
        "slot_copy_us": c.slot_copy_s * 1e6 if c.slot_copy_s is not None else None,
        # fenced runs: the fence's own cost, subtracted from a reading to give the ranked number (a reading
        # below it less the fastest null call instead: harness/parent/fence.py, `run`)
        "fence_us": c.fence_s * 1e6 if c.fence_s is not None else None,
        # --diagnostics (the worker's numbers): the competition's timing (its mean), and the wall time of an
        # isolated call (call + synchronize, the GPU idle before it) less the ranked median
        "competition_us": c.competition.mean * 1e6 if c.competition else None,
        "host_overhead_us": (c.isolated.median * 1e6 - d["median"]) if c.isolated and d.get("median") is not None
        else None,
        "energy_mj": c.energy_j * 1e3 if c.energy_j is not None else None,  # --energy: per call, from a burst of calls back to back
        "energy_err_mj": c.energy_err_j * 1e3 if c.energy_err_j is not None else None,
        "energy_note": c.energy_note or None,
        "sm_mhz_min": (c.clocks.get("sm_mhz") or [None] * 3)[1],  # the clock watch (harness/parent/gpuwatch.py)
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
    ("slot_copy_us", "slot copy µs", _us),
    ("competition_us", "comp µs", _us), ("host_overhead_us", "host overhead µs", _us),
    ("mean_us", "mean µs", _us), ("std_us", "std µs", _us),
    ("min_us", "min µs", _us), ("max_us", "max µs", _us), ("runs", "runs", _num), ("host_us", "host µs", _us),
    ("tail_us", "sync tail µs", _us), ("gbps", "GB/s", _num),
    ("pct_bandwidth", "% of BW", lambda x: _num(x, "{:.0f}%")), ("audit_us", "audit µs", _us),
    ("energy_mj", "mJ/call", lambda x: _num(x, "{:,.3f}")), ("sm_mhz_min", "SM MHz", _num),
)
OPTIONAL_COLUMNS = ("energy_mj", "sm_mhz_min", "kernel_us", "outside_us", "slot_copy_us", "competition_us",
                    "host_overhead_us")
NARROW_DROPS = ("sm_mhz_min", "tail_us", "host_us", "std_us", "mean_us", "audit_us", "max_us", "min_us", "gbps",
                "runs", "energy_mj", "host_overhead_us", "competition_us", "slot_copy_us", "outside_us", "kernel_us")


PHASE_ORDER = ("worker start", "static scan", "inputs", "reference", "untimed calls", "calls", "timed device", "check",
               "energy", "audit", "audit start", "audit inputs", "audit reference", "audit calls", "audit check",
               "audit report")


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
