"""The leaderboard, the per-case table, --history, --mode history's runs and the check's self-test
read at 80, 120 and 200 columns (issues 15, 39): no line wider than the terminal, names whole (or
shortened keeping ".py" when over 30 characters), numbers never cut, and whatever leaves the main
table shown under it."""

import dataclasses
import io
import re

import pytest
from rich.cells import cell_len
from rich.console import Console

from harness import report
from harness.results import CaseResult, SubmissionResult
from harness.results import ScanResult
from harness.timing import Stats

WIDTHS = (80, 120, 200)
SHAPES = [(batch, kv) for batch in (4, 32, 64, 256) for kv in (1024, 8192)]
LABELS = [f"{batch}×{kv // 1024}k" for batch, kv in SHAPES]
LONG_NAME = "mla_decode_fp_split_kv_persistent_kernel_with_extra_words.py"
CRASH = ("worker died: SIGSEGV (signal 11) in the submission's kernel launch after 3 calls; the last "
         "output line was [green]pass[/] and the worker log holds the full native backtrace of the crash")


def label(args: dict) -> str:
    return f"{args['batchsize']}×{args['kvseqlen'] // 1024}k"


def stats(us: float) -> Stats:
    s = us * 1e-6
    return Stats(runs=200, median=s, mean=s * 1.01, std=s * 0.02, min=s * 0.97, max=s * 1.2, ci_rel=0.01)


def cases(scale: float, noisy: int = -1) -> list[CaseResult]:
    """Two passing tests, then the eight benchmark cases timed (case `noisy` with a warning)."""
    out = [CaseResult("test", i, f"t{i}", True, args={"batchsize": 4, "kvseqlen": 1024}) for i in range(2)]
    for i, (batch, kv) in enumerate(SHAPES):
        us = scale * batch * kv / 1000
        out.append(CaseResult("benchmark", i, f"b{i}", True, device=stats(us), host=stats(9.0), tail=stats(1.5),
                              bytes=batch * kv * 576, warnings=("noisy: 95% CI ±12%",) if i == noisy else (),
                              args={"batchsize": batch, "kvseqlen": kv, "seed": i}))
    return out


FENCED = "verified: the parent's clock, fenced around each call"  # a GPU board, as the H200 prints it
RESULTS = [
    SubmissionResult(f"submissions/{LONG_NAME}", "a", cases=cases(0.9), scan=ScanResult("clean", ()),
                     variant="fp8", sandboxed=True, audit=FENCED),
    SubmissionResult("submissions/segfault.py", "b", ok=False, error=CRASH, scan=ScanResult("clean", ())),
    SubmissionResult("submissions/sneaky_timer.py", "c", cases=cases(0.4, noisy=3), variant="bf16", audit=FENCED,
                     scan=ScanResult("suspicious", ("TIMER_MONKEYPATCH (high): torch.cuda.Event.elapsed_time = f",
                                                    "STREAM_ESCAPE (medium): torch.cuda.Stream()"))),
]


def render(renderable, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def board(width: int) -> str:
    return render(report.leaderboard_table(RESULTS, label, "NVIDIA H200", 4.8e12, "geom"), width)


def assert_fits(text: str, width: int) -> None:
    too_wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not too_wide, f"{len(too_wide)} line(s) wider than {width}:\n" + "\n".join(too_wide)


def assert_no_cut_number(text: str) -> None:
    assert not re.search(r"\d…|…\d", text), "a number cut by an ellipsis"


@pytest.mark.parametrize("width", WIDTHS)
def test_leaderboard_fits_and_keeps_names_and_numbers_whole(width):
    text = board(width)
    assert_fits(text, width)
    assert_no_cut_number(text)
    rows = [line for line in text.splitlines() if line.startswith("│")]
    for r in RESULTS:
        shown = r.name if any(f" {r.name} " in line for line in rows) else report.short_name(r.name)
        assert any(f" {shown} " in line for line in rows), f"{r.name} neither whole nor shortened at {width}"
        if len(r.name) <= report.NAME_LIMIT:
            assert shown == r.name
        else:
            assert shown.endswith(".py") and shown.startswith(r.name[:10])
        if r.ok:  # its geomean, exactly as at 200 columns, on the row of its name
            geomean = report._us(r.geomean_us())
            assert geomean in board(200)
            assert any(f" {shown} " in line and f" {geomean} " in line for line in rows)
    assert LONG_NAME in text  # shortened in a table, then given in full under it


@pytest.mark.parametrize("width", WIDTHS)
def test_nothing_is_lost_at_any_width(width):
    text = board(width)
    assert "worker died: SIGSEGV" in text  # the failing reason's start
    assert "[green]pass[/]" in text  # its markup shown as text, never rendered
    assert " ".join(CRASH.split()) in " ".join(text.split())  # clipped in the table, whole under it
    for r in RESULTS:
        for c in r.cases:
            if c.device:
                assert report._us(c.device.median * 1e6) in text
    assert "TIMER_MONKEYPATCH" in text and "STREAM_ESCAPE" in text  # the scan flags, in the column or below


def test_at_200_columns_every_case_has_its_column():
    text = board(200)
    header = next(line for line in text.splitlines() if "submission" in line)
    assert all(f" {case} " in header for case in LABELS)
    assert "Per-case median" not in text  # no second table needed


@pytest.mark.parametrize("width", (80, 120))
def test_narrow_moves_cases_and_flags_under_the_table(width):
    text = board(width)
    assert "Per-case median" in text and all(case in text for case in LABELS)
    assert "2 flags" in text
    noisy = next(c for c in RESULTS[2].cases if c.warnings)
    assert report._us(noisy.device.median * 1e6) + "⚠" in text  # the noisy case keeps its mark


@pytest.mark.parametrize("width", WIDTHS)
def test_submission_table_fits(width):
    text = render(report.submission_table(RESULTS[0], label, 4.8e12), width)
    assert_fits(text, width)
    assert_no_cut_number(text)
    for c in RESULTS[0].cases:
        if c.device:
            assert report._us(c.device.median * 1e6) in text
    dropped = "Not shown at this width" in text
    assert dropped == (width == 80)  # 120 and 200 columns hold all eleven numbers
    for title in ("median", "mean", "std", "min", "max", "runs", "host", "sync", "GB/s", "% of", "audit"):
        assert title in text  # each number's column shown, or named in the note


def test_a_failing_submission_table_keeps_its_reason():
    failing = SubmissionResult("submissions/wrong.py", "d", ok=False, cases=[
        CaseResult("test", 0, "t0", False, reason="output differs from the reference: " + "worst row 17, " * 12,
                   args={"batchsize": 4, "kvseqlen": 1024})])
    for width in WIDTHS:
        text = render(report.submission_table(failing, label), width)
        assert_fits(text, width)
        assert "output differs" in text and "FAIL" in text


@pytest.mark.parametrize("name", ["kernel.py", "x" * 30 + ".py", LONG_NAME])
def test_short_name_keeps_short_names_and_the_end_of_long_ones(name):
    short = report.short_name(name)
    assert short == name if len(name) <= report.NAME_LIMIT else (
        len(short) == report.NAME_LIMIT and short.endswith(".py") and "…" in short)


def test_exports_show_a_submissions_text_as_text(tmp_path):
    """Text a submission controls (its name, its failure's reason) reaches the exports: in CSV a
    cell that a spreadsheet would run as a formula gets a leading apostrophe; in Markdown a reason
    is a code span and other text has HTML, links and code spans escaped."""
    import csv

    evil = SubmissionResult("submissions/=cmd.py", "d", ok=False, scan=ScanResult("clean", ()),
                            error="+SUM(1)", cases=[CaseResult("test", 0, "t0", False, args={"batchsize": 4, "kvseqlen": 1024},
                                                               reason="@x <script>x</script> [PASS](javascript:alert(1)) `c` *e* a|b")])
    report.write_exports([evil, RESULTS[0]], label, 4.8e12, {"commit": "<b>"}, csv_path=str(tmp_path / "r.csv"),
                         markdown_path=str(tmp_path / "r.md"))
    with open(tmp_path / "r.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows[0]["submission"] == "'=cmd.py" and rows[0]["error"] == "'+SUM(1)" and rows[0]["detail"].startswith("'@x")
    assert not [v for row in rows for v in row.values() if v and v[0] in "=+-@\t\r"]
    assert rows[1]["submission"] == LONG_NAME  # plain text is left alone
    md = (tmp_path / "r.md").read_text()
    # a reason is a code span (shown as typed: no HTML, link or autolink), other text is escaped
    assert "| `` @x <script>x</script> [PASS](javascript:alert(1)) `c` *e* a\\|b `` |" in md
    assert md.startswith("Run: commit: &lt;b&gt;")
    assert "| ` +SUM(1) ` |" in md  # a submission's own error (import, start, protocol) is in it too


def test_a_profile_table_cannot_pass_for_the_harnesss_own_lines(monkeypatch):
    # --mode profile prints the table the submission's worker built: a forged rule and verdict in it
    # stay behind a gutter the harness draws, so they cannot look like the next submission's output.
    forged = ("Name  Self CPU  CUDA total\nhonest_kernel  1.000us  1.000us\n"
              "──────── triton_bf16.py · 2×128 ────────\nFAIL triton_bf16.py: crashed\n"
              + " " * 298 + "FAIL triton_bf16.py: crashed")  # padded to wrap onto a row of its own
    case = CaseResult("profile", 0, "p0", True, args={"batchsize": 2, "kvseqlen": 128}, profile=forged)
    result = SubmissionResult("forges_profile.py", "", ok=True, cases=[case])
    console = Console(width=120, record=True, file=io.StringIO())
    monkeypatch.setattr(report, "console", console)
    report.show_finished("profile", result, lambda args: "2×128", 1, None)
    lines = console.export_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("│ Name"))
    assert all(line.startswith("│ ") for line in lines[start:start + 4])
    assert not any(line.startswith(("FAIL triton_bf16", "─")) for line in lines[start:])
    assert all(len(line) <= 120 and line.startswith("│ ") for line in lines[start:start + 7])  # no row left to wrap


def test_unverified_timings_are_ranked_apart_after_verified_ones():
    """A faster number timed inside the submission's process does not outrank a verified one: it is
    listed after every verified row, numbered u1, u2, ... and the title says what u means."""
    fast = SubmissionResult("submissions/unfenced.py", "d", cases=cases(0.1), variant="bf16",
                            audit="unverified: --no-audit (the worker's own events)")
    board = report.leaderboard_table([fast, *RESULTS], label, "H200", 4.2e12)
    assert [(row.rank, row.name) for row in board.rows][:3] == [
        ("1", "sneaky_timer.py"), ("2", LONG_NAME), ("u1", "unfenced.py")]
    assert "u = unverified" in board.title


# ---------------------------------------------------------------- --history, --mode history, selftest
HISTORY = [  # as Store.best_per_submission returns them: a GPU group and a CPU one, one name over 30 characters
    {"name": LONG_NAME, "version": "0123abcd", "task": "amd-mixed-mla", "check": "strict", "cases": "task",
     "device": "NVIDIA H200", "timing": "fenced (events)", "sandboxed": 1, "runs": 12, "best_us": 1234567.8,
     "median_us": 1334512.3, "last_run": "2026-12-04T19:00:40+00:00"},
    {"name": "torch_batched.py", "version": "dc3ab951", "task": "amd-mixed-mla", "check": "strict", "cases": "small",
     "device": "x86_64", "timing": "CPU wall clock, unverified", "sandboxed": 0, "runs": 3, "best_us": 39351.2,
     "median_us": 41234.5, "last_run": "2026-12-03T08:15:02+00:00"},
]


def joined(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("width", WIDTHS)
def test_history_fits_with_its_numbers_names_and_dates_whole(width):
    text = render(report.history_table(HISTORY, "amd-mixed-mla", "strict"), width)
    assert_fits(text, width)
    assert_no_cut_number(text)
    for row in HISTORY:
        for number in (report._us(row["best_us"]), report._us(row["median_us"]), f" {row['runs']} ", row["version"]):
            assert number in text
        rows = [line for line in text.splitlines() if line.startswith("│")]
        shown = row["name"] if any(f" {row['name']} " in line for line in rows) else report.short_name(row["name"])
        assert any(f" {shown} " in line for line in rows), f"{row['name']} neither whole nor shortened at {width}"
        assert row["name"] in text  # in the table, or in full under it
        day, time = row["last_run"][:10], row["last_run"][11:19]
        assert day in text and time in text
        assert row["timing"] in joined(text) and row["device"] in text
    assert "check strict" in joined(text) and "median of runs" in joined(text)
    assert ("UNSANDBOXED" in text or " NO " in text) and "small" in text


def test_history_with_nothing_stored_says_so():
    text = render(report.history_table([], "amd-mixed-mla", "strict"), 80)
    assert "None stored yet." in text and "┏" not in text


RUNS = [  # as Store.runs returns them, newest first
    {"id": 12, "started": "2026-12-04T19:00:40+00:00", "status": "interrupted", "mode": "leaderboard",
     "device": "NVIDIA H200", "git_commit": "8cd4c7b+dirty", "sandboxed": 1, "passed": 3, "submissions": 5},
    {"id": 11, "started": "2026-12-04T18:59:01+00:00", "status": "complete", "mode": "benchmark", "device": "x86_64",
     "git_commit": None, "sandboxed": None, "passed": 1, "submissions": 1},
    {"id": 10, "started": "2026-12-04T18:40:00+00:00", "status": "complete", "mode": "leaderboard",
     "device": "x86_64", "git_commit": "8cd4c7b", "sandboxed": 0, "passed": 2, "submissions": 2},
]


@pytest.mark.parametrize("width", WIDTHS)
def test_runs_fit_with_every_field_whole(width):
    text = render(report.runs_table(RUNS), width)
    assert_fits(text, width)
    for run in RUNS:
        for value in (run["started"][:10], run["started"][11:19], run["status"], run["mode"], run["device"],
                      run["git_commit"] or "-", f"{run['passed']}/{run['submissions']}"):
            assert value in text, value


def selftest_rows():
    from harness.task.selftest import SelftestRow
    from harness.task.spec import Case

    return [
        SelftestRow(Case({"batchsize": 2, "kvseqlen": 1024}, 0, "test"), (0.374, "honest kv=bf16,q=fp8"),
                    (45.61, "null first 95% of tokens"), []),
        SelftestRow(Case({"batchsize": 256, "kvseqlen": 8192}, 1, "benchmark"), (0.362, "honest kv=bf16,q=bf16"),
                    (135.15, "null scores without the 64 RoPE dims"), []),
        SelftestRow(Case({"batchsize": 64, "kvseqlen": 8192}, 2, "benchmark"), (1.374, "honest kv=fp8,q=fp8"),
                    (0.81, "null random 95% of tokens"), ["honest kv=fp8,q=fp8", "null random 95% of tokens"]),
    ]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("wrong", [False, True])
def test_selftest_fits_with_its_ratios_and_names_whole(width, wrong):
    rows = [r for r in selftest_rows() if wrong or r.ok]
    text = render(report.selftest_table(rows, label, "strict"), width)
    assert_fits(text, width)
    assert_no_cut_number(text)
    for r in rows:
        assert f"{r.worst_honest[0]:.3f}" in text and f"{r.best_null[0]:.2f}" in text
        assert r.worst_honest[1].removeprefix("honest ") in text and r.best_null[1].removeprefix("null ") in text
        assert label(r.case.args) in text and r.case.kind in text
    if wrong:  # the wrong verdicts, in their column or under the table
        assert "FAIL" in text and "honest kv=fp8,q=fp8, null random 95% of tokens" in joined(text)


def test_a_fenced_table_shows_the_workers_events_and_what_lies_outside_them():
    """Fenced calls: beside the ranked median, the worker's own events (a diagnostic) and the ranked
    number's part outside them, as columns of their own; unfenced results have neither."""
    timed = [dataclasses.replace(c, kernel=stats(c.device.median * 1e6 - 8.5)) if c.device else c
             for c in cases(0.9)]
    fenced = SubmissionResult("submissions/k.py", "a", cases=timed, variant="fp8", audit=FENCED)
    text = render(report.submission_table(fenced, label, 4.8e12), 200)
    assert "events" in text and "outside" in text
    assert report.case_numbers(timed[2], None)["outside_us"] == pytest.approx(8.5)
    plain = render(report.submission_table(RESULTS[0], label, 4.8e12), 200)
    assert "events" not in plain and "outside" not in plain
