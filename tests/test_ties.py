"""Ranks that respect noise (issue 41): each score's 95% interval from the timed calls a run keeps
(a seeded bootstrap), tie groups anchored on their leader, "=1" in the table, the exports, --history
and the HTML page; verified and unverified ranked apart and CPU runs unranked, as before."""

import csv
import io
import json
import random

import pytest
from rich.console import Console

from harness import report
from harness.results import CPU_TIMING
from harness.results import CaseResult, SubmissionResult, board_order, ranked
from harness.results import ScanResult
from harness.ties import score_interval, tie_groups
from harness.timing import summarize

FENCED = "verified: the parent's clock, fenced around each call"
UNFENCED = "unverified: --no-audit (the worker's own events)"
CASES_US = (15.0, 27.0, 107.0, 727.0)  # four cases' medians, as the H200 times triton_fp8


def label(args: dict) -> str:
    return f"case{args['i']}"


def timed(scale: float, spread: float, seed: int, n: int = 100) -> list[CaseResult]:
    """A passing test, then four benchmark cases whose n calls scatter ±`spread` (relative, uniform)
    around scale × CASES_US."""
    rng = random.Random(seed)
    out = [CaseResult("test", 0, "t0", True, args={"i": 0})]
    for i, us in enumerate(CASES_US):
        samples = tuple(scale * us * 1e-6 * (1 + rng.uniform(-spread, spread)) for _ in range(n))
        out.append(CaseResult("benchmark", i, f"b{i}", True, args={"i": i}, device=summarize(list(samples)),
                              samples=samples))
    return out


def result(name: str, scale: float, spread: float, seed: int, audit: str = FENCED) -> SubmissionResult:
    return SubmissionResult(f"submissions/{name}", name[:4], cases=timed(scale, spread, seed), audit=audit,
                            scan=ScanResult("clean", ()), sandboxed=True)


def ranks(results) -> dict[str, str]:
    return {r.name: rank for r, rank in board_order(results)}


def test_the_interval_is_deterministic_and_holds_the_score():
    r = result("a.py", 1.0, 0.05, seed=1)
    lo, hi = r.score_interval_us("geom")
    assert lo < r.geomean_us() < hi and (hi - lo) / r.geomean_us() < 0.05
    assert result("a.py", 1.0, 0.05, seed=1).score_interval_us("geom") == (lo, hi)  # the same samples, the same
    assert score_interval([[1.0, 2.0], []]) is None and score_interval([[1.0, -2.0]]) is None
    no_samples = SubmissionResult("x.py", "x", cases=[CaseResult("benchmark", 0, "b", True, device=summarize([1e-5]))])
    assert no_samples.score_interval_us("geom") is None  # (older results: no calls kept, no interval, no tie)


def test_a_run_to_run_spread_widens_every_interval(monkeypatch):
    from harness import ties

    r = result("a.py", 1.0, 0.004, seed=1)
    monkeypatch.setattr(ties, "RUN_TO_RUN_REL", 0.0)
    lo, hi = r.score_interval_us("geom")
    monkeypatch.setattr(ties, "RUN_TO_RUN_REL", 0.01)
    wide_lo, wide_hi = r.score_interval_us("geom")
    assert wide_lo < lo - 0.009 * r.geomean_us() and wide_hi > hi + 0.009 * r.geomean_us()


def test_files_whose_intervals_overlap_share_the_first_rank():
    """fp8 and mxfp4 on the H200: 56.2 against 56.3 µs from seed to seed, one table calling one "1"."""
    fp8, mxfp4 = result("triton_fp8.py", 1.000, 0.04, seed=2), result("triton_mxfp4.py", 1.002, 0.04, seed=3)
    slow = result("triton_bf16.py", 1.10, 0.01, seed=4)
    a, b = fp8.score_interval_us("geom"), mxfp4.score_interval_us("geom")
    assert a[0] <= b[1] and b[0] <= a[1]  # they overlap
    assert ranks([fp8, mxfp4, slow]) == {"triton_fp8.py": "=1", "triton_mxfp4.py": "=1", "triton_bf16.py": "3"}


def test_a_copy_3_percent_slower_with_tight_samples_ranks_strictly_behind():
    original, copy = result("triton_fp8.py", 1.0, 0.004, seed=5), result("triton_fp8_plus3.py", 1.03, 0.004, seed=6)
    assert ranks([copy, original]) == {"triton_fp8.py": "1", "triton_fp8_plus3.py": "2"}


def test_groups_are_anchored_on_their_leader_overlap_is_not_transitive():
    # intervals: A [10, 12], B [11, 14], C [13, 15]: A~B and B~C, but C does not reach A: C leads a new group
    rows = [("A", 11.0, (10.0, 12.0)), ("B", 12.5, (11.0, 14.0)), ("C", 14.0, (13.0, 15.0)), ("D", 14.5, (14.8, 16))]
    assert tie_groups(rows, lambda r: r[1], lambda r: r[2]) == [0, 0, 2, 2]
    labels = [rank for _, rank in ranked(rows, lambda r: r[1], lambda r: True, lambda r: r[0], lambda r: r[2])]
    assert labels == ["=1", "=1", "=3", "=3"]


def test_unverified_ties_are_ranked_apart_and_cpu_runs_rank_nothing():
    verified = result("fenced.py", 1.0, 0.01, seed=7)
    u1, u2 = (result(f"unfenced{i}.py", 0.5, 0.05, seed=8 + i, audit=UNFENCED) for i in (1, 2))
    assert ranks([u1, verified, u2]) == {"fenced.py": "1", "unfenced1.py": "=u1", "unfenced2.py": "=u1"}
    cpu = [result("a.py", 1.0, 0.05, seed=9, audit=CPU_TIMING), result("b.py", 1.0, 0.05, seed=10, audit=CPU_TIMING)]
    assert set(ranks(cpu).values()) == {""}


def render(renderable, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


@pytest.mark.parametrize("width", (80, 200))
def test_the_leaderboard_shows_ties_and_intervals(width):
    results = [result("triton_fp8.py", 1.0, 0.04, seed=2), result("triton_mxfp4.py", 1.002, 0.04, seed=3),
               result("triton_bf16.py", 1.10, 0.01, seed=4)]
    text = render(report.leaderboard_table(results, label, "NVIDIA H200"), width)
    assert all(len(line) <= width for line in text.splitlines())
    rows = [line for line in text.splitlines() if ".py" in line and line.startswith("│")]
    assert rows[0].startswith("│ =1 │") and rows[1].startswith("│ =1 │") and rows[2].startswith("│  3 │")
    lo, hi = results[0].score_interval_us("geom")
    assert f"{report._us(lo)}–{report._us(hi)}" in text  # in its column, or under the table
    assert "=N: tied" in " ".join(text.split())


def test_exports_carry_the_interval_and_the_tie_group(tmp_path):
    results = [result("triton_fp8.py", 1.0, 0.04, seed=2), result("triton_mxfp4.py", 1.002, 0.04, seed=3),
               result("triton_bf16.py", 1.10, 0.01, seed=4)]
    paths = [tmp_path / f"r.{ext}" for ext in ("json", "csv", "md")]
    report.write_exports(results, label, None, {"run": 1}, *map(str, paths))
    doc = json.loads(paths[0].read_text())
    first = {row["submission"]: row for row in doc["rows"]}
    assert first["triton_fp8.py"]["rank"] == "=1" and first["triton_fp8.py"]["tie_group"] == "1"
    assert first["triton_mxfp4.py"]["tie_group"] == "1" and first["triton_bf16.py"]["tie_group"] == "3"
    lo, hi = results[0].score_interval_us("geom")
    assert (first["triton_fp8.py"]["geomean_ci_low_us"], first["triton_fp8.py"]["geomean_ci_high_us"]) == (lo, hi)
    assert "bootstrap" in doc["run"]["ties"]
    rows = list(csv.DictReader(paths[1].open()))
    # (a spreadsheet would read =1 as a formula giving 1: the CSV keeps it text, as every cell starting with =)
    assert {r["rank"] for r in rows if r["submission"] == "triton_mxfp4.py"} == {"'=1"}
    assert {r["tie_group"] for r in rows if r["submission"] == "triton_mxfp4.py"} == {"1"}
    assert "geomean_ci_low_us" in rows[0]
    md = paths[2].read_text()
    assert "| =1 | triton_fp8.py |" in md and "geomean_ci_us" in md


def test_history_stores_the_interval_and_ranks_versions_with_ties(tmp_path):
    from harness.device import DeviceInfo
    from harness.report.store import Store

    store = Store(tmp_path / "r.db")
    gpu = DeviceInfo("cuda", "nvidia", "NVIDIA H200", "sm_90", 0)
    for files in ((("triton_fp8.py", 1.0, 2), ("triton_mxfp4.py", 1.002, 3), ("triton_bf16.py", 1.1, 4)),):
        run = store.start_run("leaderboard", "amd-mixed-mla", gpu, {}, "fenced (events)", True, "strict", "task")
        for name, scale, seed in files:
            store.add_submission(run, result(name, scale, 0.04 if scale < 1.05 else 0.01, seed), label)
        store.finish_run(run)
    rows = store.best_per_submission(task="amd-mixed-mla", check="strict")
    assert all(row["best_ci_us"][0] < row["best_us"] < row["best_ci_us"][1] for row in rows)
    text = render(report.history_table(rows, "amd-mixed-mla", "strict"), 200)
    ranked_rows = [line for line in text.splitlines() if ".py" in line]
    assert [line[:6] for line in ranked_rows] == ["│ =1 │", "│ =1 │", "│  3 │"]
    assert "±" in text


def test_the_html_page_sorts_tied_ranks():
    from harness.report.html_report import _rank_key

    assert _rank_key("=1") == _rank_key("1") < _rank_key("3") < _rank_key("=u1") < _rank_key("-")


def test_the_html_page_shows_tied_ranks_intervals_clocks_and_energy(tmp_path):
    pytest.importorskip("matplotlib")
    from harness.device import DeviceInfo
    from harness.report.html_report import write_page
    from harness.report.store import Store

    store = Store(tmp_path / "r.db")
    gpu = DeviceInfo("cuda", "nvidia", "NVIDIA H200", "sm_90", 0)
    run = store.start_run("leaderboard", "amd-mixed-mla", gpu, {}, "fenced (events)", True, "strict", "task")
    for name, scale, seed in (("triton_fp8.py", 1.0, 2), ("triton_mxfp4.py", 1.002, 3)):
        r = result(name, scale, 0.04, seed)
        for c in r.timed_cases():
            c.clocks, c.energy_j = {"sm_mhz": [1980, 1980, 1980], "mem_mhz": [3201] * 3, "temp_c_max": 51}, 0.0123
        store.add_submission(run, r, label)
    store.finish_run(run)
    page = write_page(store, tmp_path / "page.html", run).read_text()
    assert page.count("\">=1</td>") == 2 and "12.300 mJ" in page  # both rows of the board tied
    assert "clocks steady: SM 1980 MHz, memory 3201 MHz, max 51 °C" in page
    lo, hi = result("triton_fp8.py", 1.0, 0.04, 2).score_interval_us("geom")
    assert f"{lo:,.1f}–{hi:,.1f}" in page
