"""PNG charts of a run (matplotlib, optional): the leaderboard and the roofline."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Optional, Sequence

from harness.results import CaseResult, SubmissionResult, cpu_timed, geomean


class PlotError(RuntimeError):
    pass


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("--plot needs matplotlib: pip install -e '.[plots]'") from None
    return plt


def write_plots(results: Sequence[SubmissionResult], label: Callable[[dict], str], bandwidth: Optional[float],
                device: str, folder: str | Path) -> list[Path]:
    """leaderboard.png and roofline.png in `folder`; returns the paths written."""
    plt = _pyplot()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    passing = sorted((r for r in results if r.geomean_us() is not None), key=lambda r: r.geomean_us())
    if not passing:
        raise PlotError("--plot: no submission passed with timings, nothing to plot")
    return [_leaderboard(plt, passing, label, device, folder / "leaderboard.png", cpu_timed(results)),
            _roofline(plt, passing, label, bandwidth, device, folder / "roofline.png")]


def _cases(r: SubmissionResult):
    return [c for c in r.cases if c.kind == "benchmark" and c.ok and c.device]


LOG_FLOOR = 1e-3  # an interval reaching 0 or below is drawn down to this fraction of its median (log axes)


def interval_us(c: CaseResult) -> tuple[float, float]:
    """The 95% interval of a case's median, in µs, as the run stored it (median ± ci_rel · median,
    harness/timing.py), its low end kept above 0 for the log axes."""
    median, ci = c.device.median * 1e6, c.device.ci_rel
    high = median * (1 + ci) if math.isfinite(ci) else median / LOG_FLOOR
    return max(median * (1 - ci), median * LOG_FLOOR), high


def geomean_interval_us(r: SubmissionResult) -> tuple[float, float]:
    """Where the geomean of the per-case medians lies when each median lies in its 95% interval:
    the geomean of the intervals' low ends to that of their high ends."""
    lows, highs = zip(*(interval_us(c) for c in _cases(r)))
    return geomean(list(lows)), geomean(list(highs))


def _errors(values: Sequence[float], intervals: Sequence[tuple[float, float]]) -> list[list[float]]:
    """matplotlib's asymmetric error bars: [below each value, above each value]."""
    return [[v - lo for v, (lo, _) in zip(values, intervals)], [hi - v for v, (_, hi) in zip(values, intervals)]]


def _leaderboard(plt, results, label, device: str, path: Path, cpu: bool = False) -> Path:
    """Per submission its geomean, per case its median, each with its 95% interval as an error bar.
    `cpu`: CPU times, titled as no GPU ranking."""
    cases = [label(c.args) for c in _cases(results[0])]
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 1.2 + 0.6 * max(3, len(results))),
                                      gridspec_kw={"width_ratios": [1, 2.2]})
    names = [r.name for r in results][::-1]
    geo = [r.geomean_us() for r in results][::-1]
    spans = [geomean_interval_us(r) for r in results][::-1]
    left.barh(names, geo, color="tab:blue", xerr=_errors(geo, spans), error_kw={"capsize": 3, "elinewidth": 1})
    for y, (g, (_, high)) in enumerate(zip(geo, spans)):  # the value beyond its error bar
        left.annotate(f"{g:,.1f} µs", (high, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=9)
    left.set_xscale("log")
    left.set_xlabel("geometric mean of per-case medians, µs (log; lower is better);\n"
                    "error bars: the geomean with every median at its 95% interval's ends")
    left.set_title("CPU times: not a GPU ranking" if cpu else "Ranking")
    width = 0.8 / len(results)
    for i, r in enumerate(results):
        timed = {label(c.args): c for c in _cases(r)}
        shown = [c for c in cases if c in timed]  # (a case it has no time for gets no bar)
        medians = [timed[c].device.median * 1e6 for c in shown]
        xs = [cases.index(c) + i * width for c in shown]
        right.bar(xs, medians, width=width, label=r.name, yerr=_errors(medians, [interval_us(timed[c]) for c in shown]),
                  error_kw={"capsize": 2, "elinewidth": 1})
    right.set_xticks([j + width * (len(results) - 1) / 2 for j in range(len(cases))], cases, rotation=0)
    right.set_yscale("log")
    right.set_ylabel(f"median {'CPU' if cpu else 'device'} µs per call (log)")
    right.set_title("Per case (error bars: the median's 95% interval)")
    right.legend(fontsize=8, loc="upper left")
    right.grid(axis="y", which="both", alpha=0.3)
    fig.suptitle(f"Leaderboard on {device}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _roofline(plt, results, label, bandwidth: Optional[float], device: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(10, 6))
    most = 0.0
    for r in results:
        pts = sorted((c.bytes, c.bytes / c.device.median / 1e9, label(c.args)) for c in _cases(r) if c.bytes)
        if not pts:
            continue
        xs, ys, names = zip(*pts)
        most = max(most, *ys)
        ax.plot(xs, ys, marker="o", linewidth=1, label=f"{r.name} (reads {r.variant})")
        for x, y, name in pts:
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    if bandwidth:
        ax.axhline(bandwidth / 1e9, color="black", linestyle="--",
                   label=f"measured copy bandwidth {bandwidth / 1e12:.2f} TB/s")
        most = max(most, bandwidth / 1e9)
    ax.set_xscale("log")
    ax.set_ylim(0, most * 1.15 if most else 1)
    ax.set_xlabel("bytes the case must move for the format the submission reads (log)")
    ax.set_ylabel("achieved GB/s (bytes / median time)")
    ax.set_title(f"Roofline on {device}: how close each case gets to the memory bandwidth")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
