"""PNG charts of a run (matplotlib, optional): the leaderboard and the roofline."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Sequence

from harness.results import SubmissionResult


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
    return [_leaderboard(plt, passing, label, device, folder / "leaderboard.png"),
            _roofline(plt, passing, label, bandwidth, device, folder / "roofline.png")]


def _cases(r: SubmissionResult):
    return [c for c in r.cases if c.kind == "benchmark" and c.ok and c.device]


def _leaderboard(plt, results, label, device: str, path: Path) -> Path:
    cases = [label(c.args) for c in _cases(results[0])]
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 1.2 + 0.6 * max(3, len(results))),
                                      gridspec_kw={"width_ratios": [1, 2.2]})
    names = [r.name for r in results][::-1]
    geo = [r.geomean_us() for r in results][::-1]
    bars = left.barh(names, geo, color="tab:blue")
    left.bar_label(bars, labels=[f"{g:,.1f} µs" for g in geo], padding=3, fontsize=9)
    left.set_xscale("log")
    left.set_xlabel("geometric mean of per-case medians, µs (log; lower is better)")
    left.set_title("Ranking")
    width = 0.8 / len(results)
    for i, r in enumerate(results):
        medians = {label(c.args): c.device.median * 1e6 for c in _cases(r)}
        xs = [j + i * width for j in range(len(cases))]
        right.bar(xs, [medians.get(c, 0) for c in cases], width=width, label=r.name)
    right.set_xticks([j + width * (len(results) - 1) / 2 for j in range(len(cases))], cases, rotation=0)
    right.set_yscale("log")
    right.set_ylabel("median device time per call, µs (log)")
    right.set_title("Per case")
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
