"""What the report says is what happened (issue 39, items 10 and 11): the --compare hint is a command
that runs; CPU times are named as CPU times in the exports, and neither the table nor the exports
rank them; the Markdown export ranks as the terminal does; the leaderboard plot draws the stored 95%
intervals."""

import csv
import io
import json
import sys

import pytest
from rich.cells import cell_len
from rich.console import Console

from harness import report
from harness.results import CPU_TIMING
from harness.results import CaseResult, SubmissionResult
from harness.results import ScanResult
from harness.timing import Stats

FENCED = "verified: the parent's clock, fenced around each call"
UNFENCED = "unverified: --no-audit (the worker's own events)"


def label(args: dict) -> str:
    return f"{args['batchsize']}×{args['kvseqlen']}"


def timed(us: float, ci: float = 0.05) -> list[CaseResult]:
    """One passing test, then two benchmark cases timed at `us` and 3·`us` (95% interval ±`ci`)."""
    out = [CaseResult("test", 0, "t0", True, args={"batchsize": 2, "kvseqlen": 64})]
    for i, scale in enumerate((1, 3)):
        s = us * scale * 1e-6
        out.append(CaseResult("benchmark", i, f"b{i}", True, args={"batchsize": 2 * (i + 1), "kvseqlen": 128},
                              bytes=1_000_000 * scale,
                              device=Stats(runs=50, median=s, mean=s, std=0.0, min=s, max=s, ci_rel=ci)))
    return out


def board(audit: str) -> list[SubmissionResult]:
    """A run as the CPU (audit CPU_TIMING) or a GPU times it: the slow torch loop, a fast kernel, a crash."""
    return [SubmissionResult("submissions/torch_loop.py", "a", cases=timed(900.0), scan=ScanResult("clean", ()),
                             audit=audit, sandboxed=True),
            SubmissionResult("submissions/triton_bf16.py", "b", cases=timed(40.0, ci=0.5),
                             scan=ScanResult("clean", ()), audit=audit, sandboxed=True),
            SubmissionResult("submissions/crashes.py", "c", ok=False, error="crashed: worker exited with code 2",
                             scan=ScanResult("clean", ()), audit=audit)]


def render(renderable, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def exports(tmp_path, results, meta, **kw) -> tuple[dict, list[dict], str]:
    paths = {ext: tmp_path / f"r.{ext}" for ext in ("json", "csv", "md")}
    report.write_exports(results, label, None, meta, str(paths["json"]), str(paths["csv"]), str(paths["md"]), **kw)
    with open(paths["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    return json.loads(paths["json"].read_text()), rows, paths["md"].read_text()


# ---------------------------------------------------------------- item 11: CPU times rank nothing
@pytest.mark.parametrize("width", (80, 120, 200))
def test_a_cpu_leaderboard_has_no_rank_and_says_why_in_one_line(width):
    text = render(report.leaderboard_table(board(CPU_TIMING), label, "x86_64 (cpu)"), width)
    lines = text.splitlines()
    assert lines[0].rstrip() == report.CPU_BANNER and cell_len(report.CPU_BANNER) <= 80  # one line at 80 columns
    header = next(line for line in lines if "submission" in line)
    assert not header.startswith("┃  # ┃") and " # " not in header
    main = lines[:next(i for i, line in enumerate(lines) if line.startswith("└"))]  # the main table only
    rows = [line for line in main if line.startswith("│") and ".py" in line]
    assert not any(line.lstrip("│ ").startswith(("1 ", "u1 ", "2 ", "u2 ")) for line in rows)
    names = [next(n for n in ("torch_loop.py", "triton_bf16.py", "crashes.py") if n in line) for line in rows]
    assert names == ["torch_loop.py", "triton_bf16.py", "crashes.py"]  # timed ones by name, not by time
    assert "Leaderboard on" not in text and "Results on x86_64" in text
    assert "would rank by geomean µs" in " ".join(text.split())
    assert "u = unverified" not in text


def test_a_gpu_leaderboard_still_ranks():
    lb = report.leaderboard_table(board(FENCED), label, "NVIDIA H200")
    assert [(row.rank, row.name) for row in lb.rows] == [("1", "triton_bf16.py"), ("2", "torch_loop.py"),
                                                          ("-", "crashes.py")]
    text = render(lb, 200)
    assert report.CPU_BANNER not in text and "Leaderboard on NVIDIA H200" in text
    assert any(line.startswith("│ 1 │ triton_bf16.py") for line in text.splitlines())


def test_cpu_exports_carry_the_flag_and_name_the_cpu_clock(tmp_path):
    """The run's timing field names the CPU clock whatever the caller's device said (a GPU host that
    ran its workers on the CPU, --gpus 0); no row has a rank; the Markdown says why in its banner."""
    doc, rows, md = exports(tmp_path, board(CPU_TIMING), {"run": 3, "timing": "events"})
    assert doc["run"]["timing"] == "CPU wall clock, unverified" and "events" not in json.dumps(doc["run"])
    assert doc["run"]["cpu_timing"] is True and doc["run"]["ranking"] is None
    assert all(row["rank"] is None for row in doc["rows"])
    assert all(row["rank"] == "" for row in rows) and {row["submission"] for row in rows} == {
        "torch_loop.py", "triton_bf16.py", "crashes.py"}
    assert "timing: CPU wall clock, unverified" in md and "cpu_timing: True" in md
    assert f"**{report.CPU_BANNER}**" in md
    header = next(line for line in md.splitlines() if line.startswith("| "))
    assert header.startswith("| submission |") and "rank" not in header


# ---------------------------------------------------------------- item 10: small lies
def test_gpu_exports_rank_as_the_terminal_does(tmp_path):
    results = board(FENCED) + [SubmissionResult("submissions/unfenced.py", "d", cases=timed(10.0), audit=UNFENCED)]
    doc, rows, md = exports(tmp_path, results, {"run": 4, "timing": "fenced (events)"})
    assert doc["run"]["timing"] == "fenced (events)" and doc["run"]["cpu_timing"] is False
    assert doc["run"]["ranking"] == "geomean µs"
    ranks = {row["submission"]: row["rank"] for row in doc["rows"]}
    assert ranks == {"triton_bf16.py": "1", "torch_loop.py": "2", "unfenced.py": "u1", "crashes.py": "-"}
    assert [row["submission"] for row in rows][:3] == ["torch_loop.py"] * 3  # JSON and CSV: the run's order
    lines = [line for line in md.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| rank | submission | passed |")
    shown = [line.split(" | ")[:2] for line in lines[1:]]
    firsts = list(dict.fromkeys(tuple(pair) for pair in shown))
    assert firsts == [("| 1", "triton_bf16.py"), ("| 2", "torch_loop.py"), ("| u1", "unfenced.py"),
                      ("| -", "crashes.py")]  # the terminal leaderboard's order and labels
    assert report.CPU_BANNER not in md


def test_the_markdown_rank_follows_the_tasks_ranking(tmp_path):
    fast_last = SubmissionResult("a.py", "a", cases=timed(10.0), audit=FENCED)   # cases 10, 30
    fast_geo = SubmissionResult("b.py", "b", cases=timed(12.0), audit=FENCED)    # cases 12, 36
    fast_geo.cases[-1].device = Stats(50, 20e-6, 20e-6, 0, 20e-6, 20e-6, 0.01)    # cases 12, 20: last 20 < 30
    _, _, md = exports(tmp_path, [fast_last, fast_geo], {}, ranking="last")
    assert "| 1 | b.py |" in md and "| 2 | a.py |" in md and "ranking: last case µs" in md


def test_the_runs_table_names_a_compare_command_that_runs(monkeypatch):
    """The hint under --mode history is the command, with two real timed runs: older first (A),
    newest second (B), --db where one was named; `mla-eval` when that is how the harness started."""
    from harness.cli import build_parser

    runs = [{"id": i, "started": "2026-12-04T19:00:00+00:00", "status": status, "mode": mode, "device": "x86_64",
             "git_commit": "abc1234", "sandboxed": 1, "passed": 1, "submissions": 1}
            for i, status, mode in ((9, "running", "leaderboard"), (8, "complete", "test"),
                                    (7, "complete", "benchmark"), (5, "complete", "leaderboard"))]
    monkeypatch.setattr(sys, "argv", ["eval.py"])
    text = render(report.runs_table(runs), 80)
    hint = next(line.strip() for line in text.splitlines() if "--compare" in line)
    assert hint == "python eval.py --mode history --compare 5 7"
    args = build_parser().parse_args(hint.split()[2:])
    assert args.mode == "history" and args.compare == [5, 7]
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/mla-eval"])
    text = render(report.runs_table(runs[:2], db="/tmp/r.db"), 120)
    assert "mla-eval --mode history --db /tmp/r.db --compare RUN_A RUN_B" in text


def test_the_leaderboard_plot_draws_the_stored_intervals(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    from matplotlib.container import ErrorbarContainer

    from harness.report import plots

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    results = board(FENCED)
    plots.write_plots(results, label, None, "NVIDIA H200", tmp_path)
    left, right = figures[0].axes

    def spans(ax, axis):  # every error bar's (low, high) along `axis`
        bars = [c for c in ax.containers if isinstance(getattr(c, "errorbar", None), ErrorbarContainer)]
        segments = [seg for c in bars for seg in c.errorbar.lines[2][0].get_segments()]
        return sorted((round(min(seg[:, axis]), 6), round(max(seg[:, axis]), 6)) for seg in segments)

    expected = sorted((round(c.device.median * 1e6 * (1 - c.device.ci_rel), 6),
                       round(c.device.median * 1e6 * (1 + c.device.ci_rel), 6))
                      for r in results[:2] for c in r.cases if c.device)
    assert spans(right, 1) == expected  # per case: median ± its stored 95% interval
    geo = sorted((round(lo, 6), round(hi, 6)) for lo, hi in (plots.geomean_interval_us(r) for r in results[:2]))
    assert spans(left, 0) == geo
    assert geo[0] == (round(40.0 * 3 ** 0.5 * 0.5, 6), round(40.0 * 3 ** 0.5 * 1.5, 6))  # triton_bf16: ±50%
    assert left.get_title() == "Ranking"
    figures.clear()
    plots.write_plots(board(CPU_TIMING), label, None, "x86_64 (cpu)", tmp_path)
    assert figures[0].axes[0].get_title() == "CPU times: not a GPU ranking"


@pytest.mark.parametrize("audit", [CPU_TIMING, FENCED], ids=["cpu", "gpu"])
def test_the_html_page_says_when_its_times_are_the_cpus(tmp_path, audit):
    """A CPU run stored with the database's old default timing ("events") is shown as the CPU's
    clock, under a banner; a fenced GPU run has neither."""
    import types

    from harness.report.html_report import write_page
    from harness.report.store import Store

    store = Store(tmp_path / "r.db")
    device = types.SimpleNamespace(name="x86_64" if audit == CPU_TIMING else "NVIDIA H200", vendor="cpu", arch="")
    run = store.start_run("leaderboard", "amd-mixed-mla", device, {}, "events", sandboxed=True, check_policy="strict",
                          cases="small")
    for result in board(audit):
        store.add_submission(run, result, label)
    store.finish_run(run)
    page = write_page(store, tmp_path / "page.html").read_text()
    cpu = audit == CPU_TIMING
    assert ("Not a GPU ranking: CPU times" in page) == cpu
    assert ("timing: CPU wall clock, unverified" in page) == cpu and ("timing: events" in page) == (not cpu)


def test_an_error_stays_one_line_however_long_its_path(capsys):
    """An error names a file, and a file's path can be longer than the terminal: the line is not wrapped."""
    from harness import report

    report.error(f"--json {'/deep' * 80}/out.json: the folder does not exist")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --json /deep")
