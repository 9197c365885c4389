"""Statistics and the stopping rule; the store's transactions."""

import collections
import sqlite3
from pathlib import Path

import pytest
from conftest import ROOT, gpu_case_inputs

from harness.device import detect
from harness.results import CaseResult, SubmissionResult
from harness.report.store import Store
from harness.timing import median_ci, should_stop, summarize


def test_summarize():
    s = summarize([3.0, 1.0, 2.0, 4.0, 100.0])
    assert (s.runs, s.median, s.min, s.max) == (5, 3.0, 1.0, 100.0)
    assert s.mean == pytest.approx(22.0)


def test_median_ci_narrows_with_more_samples():
    few = [1.0 + 0.01 * i for i in range(10)]
    many = [1.0 + 0.01 * (i % 10) for i in range(1000)]
    lo1, hi1 = median_ci(few)
    lo2, hi2 = median_ci(many)
    assert lo1 <= 1.045 <= hi1 and (hi2 - lo2) <= (hi1 - lo1)


def test_should_stop():
    kw = dict(min_runs=3, max_runs=10, max_seconds=5.0, target_rel_ci=0.01)
    assert not should_stop([1.0, 1.0], 0.1, **kw)                     # below min_runs
    assert should_stop([1.0] * 10, 0.1, **kw)                          # max_runs
    assert should_stop([1.0, 5.0, 9.0], 6.0, **kw)                     # time budget
    assert not should_stop([1.0, 5.0, 9.0, 2.0], 1.0, **kw)            # noisy, time left
    assert should_stop([1.0] * 5, 0.1, **kw)                           # tight CI


def test_a_failing_insert_leaves_no_half_written_submission(tmp_path, monkeypatch):
    store = Store(tmp_path / "r.db")
    run = store.start_run("test", "t", detect("cpu"), {"torch": "x"})
    good = SubmissionResult("a.py", "0" * 64, cases=[CaseResult("test", 0, "c", True, "ok")])
    store.add_submission(run, good)
    bad = SubmissionResult("b.py", "1" * 64, cases=[CaseResult("test", 0, "c", True, "ok"), None])
    with pytest.raises(AttributeError):
        store.add_submission(run, bad)   # dies after inserting the submission row and one case
    db = sqlite3.connect(tmp_path / "r.db")
    assert [r[0] for r in db.execute("SELECT name FROM submissions")] == ["a.py"]
    assert db.execute("SELECT COUNT(*) FROM cases").fetchone()[0] == 1
    assert db.execute("SELECT status FROM runs").fetchone()[0] == "running"   # never marked complete
    store.finish_run(run)
    assert db.execute("SELECT status FROM runs").fetchone()[0] == "complete"


def test_timing_integrity_rules():
    from harness.timing import tail_problem, timing_problem
    from harness.timing import CallTiming

    ok = CallTiming(device_s=600e-6, host_s=30e-6, tail_s=110e-6, replaced=())
    assert timing_problem(ok, floor_s=100e-6) is None              # honest jitter seen on the H200
    stalled = CallTiming(device_s=20e-6, host_s=30e-6, tail_s=1.8e-3, replaced=())
    assert timing_problem(stalled, None) is None  # one call: a host stall can do this (tail_problem counts them)
    patched = CallTiming(60e-6, 30e-6, 10e-6, ("torch.cuda.Event.elapsed_time",))
    assert "torch.cuda.Event.elapsed_time was replaced" in timing_problem(patched, None)
    too_fast = CallTiming(1e-6, 30e-6, 10e-6, ())
    assert "below the physical floor" in timing_problem(too_fast, floor_s=5e-6)
    # case medians: honest H200 numbers pass, hidden work larger than the measured part fails
    assert tail_problem([19e-6, 25e-6, 110e-6], [15e-6, 16e-6, 15e-6]) is None
    assert tail_problem([86e-6] * 5, [604e-6] * 5) is None
    assert "median 70 µs after the end event" in tail_problem([70e-6] * 5, [30e-6] * 5)
    # calls with far more left behind than measured: one (a host stall) passes, a pattern fails
    honest = [20e-6] * 99
    assert tail_problem(honest + [1.8e-3], [15e-6] * 100) is None
    assert tail_problem(honest[:97] + [1.8e-3] * 3, [15e-6] * 100) is None          # 3% of the calls
    assert "after 6 of 100 timed calls: up to 2.00 ms" in tail_problem(honest[:94] + [1.8e-3] * 5 + [2e-3], [15e-6] * 100)
    assert "after 3 of 20 timed calls" in tail_problem([20e-6] * 17 + [5e-3] * 3, [15e-6] * 20)


def test_noise_warnings():
    from harness.timing import noise_warnings
    from harness.timing import summarize

    def warnings(samples, elapsed=1.0):
        return noise_warnings(samples, summarize(samples), elapsed=elapsed, budget=5.0, target_rel_ci=0.01)

    assert warnings([10.0, 10.1, 9.9, 10.0, 10.05] * 4) == ()
    spread = warnings([10.0, 30.0, 5.0, 12.0, 20.0], elapsed=5.0)
    assert any(w.startswith("noisy: the middle half of the calls spans 83% of the median") for w in spread)
    assert any(w.startswith("time budget hit") for w in spread)
    # Two calls of 80 at 100x the median (a std of ~1500% of it, as on the H200 in session 19) leave
    # the median and its CI alone: no warning. Five of 80 (over 5%) are worth one.
    steady = [14e-6 + 1e-8 * (i % 7) for i in range(80)]
    assert summarize(steady[:78] + [1.4e-3] * 2).std > 10 * 14e-6
    assert warnings(steady[:78] + [1.4e-3] * 2) == ()
    assert warnings(steady[:75] + [1.4e-3] * 5) == ("slow calls: 5 of 80 took over 2x the median (up to 1400.0 µs)",)
    assert warnings(steady[:76] + [1.4e-3] * 4) == ()
    assert warnings(steady[:15] + [1.4e-3]) == ()                         # one of 16: under SLOW_CALLS
    assert warnings(steady[:13] + [1.4e-3] * 3)[0].startswith("slow calls: 3 of 16")
    flags = [False] * 75 + [True, False, True, True, False]              # 3 of the 5 slow calls caught up
    slow = steady[:75] + [1.4e-3] * 5
    assert noise_warnings(slow, summarize(slow), 1.0, 5.0, 0.01, flags) == (
        "slow calls: 5 of 80 took over 2x the median (up to 1400.0 µs; 3 of them launch-bound)",)


def test_phase_breakdown_is_recorded_shown_and_exported(problem, cpu, tmp_path):
    import json

    from conftest import ROOT
    from harness.config import RunContext
    from harness.parent.engine import evaluate
    from harness.config import RunConfig
    from harness.report import phase_line, write_exports

    ctx = RunContext(problem, cpu, RunConfig(small=True, logs=str(tmp_path / "logs"), seed=7))
    result = evaluate(ROOT / "submissions" / "torch_batched.py", ctx, "leaderboard")
    assert result.ok, result.error or [f"{c.name}: {c.reason}" for c in result.cases if not c.ok]
    phases = result.phases
    for name in ("worker start", "static scan", "inputs", "reference", "untimed calls", "calls", "timed device", "check",
                 "total"):
        assert phases[name] > 0, name
    parts = sum(v for k, v in phases.items() if k not in ("total", "timed device"))
    assert parts <= phases["total"] and phases["timed device"] <= phases["calls"]
    assert phase_line(result).startswith(f"torch_batched.py: {phases['total']:.1f} s = worker start ")
    write_exports([result], problem.label, None, {"run": 1}, json_path=str(tmp_path / "r.json"))
    row = json.loads((tmp_path / "r.json").read_text())["rows"][0]
    assert row["seconds_total"] == pytest.approx(phases["total"], abs=1e-3)
    store = Store(str(tmp_path / "r.db"))
    run = store.start_run("leaderboard", "t", cpu, {})
    store.add_submission(run, result)
    stored = json.loads(store.db.execute("SELECT phases FROM submissions").fetchone()[0])
    assert stored["calls"] == pytest.approx(phases["calls"], abs=1e-3)


def test_graph_capture_falls_back_with_a_reason(problem, cpu, tmp_path):
    """Without CUDA the worker cannot capture: it says why and keeps serving plain calls."""
    from conftest import ROOT
    from harness.parent.sandbox import Sandbox

    case = problem.spec.cases("benchmark", small=True)[0]
    data = problem.generate(case.args, case.seed, cpu.torch_device)
    with Sandbox(ROOT / "submissions" / "torch_batched.py", cpu, tmp_path / "w.log", 120) as box:
        box.wait_ready()
        box.share_inputs(data, *problem.layout(data))
        captured, why = box.capture(timeout=60)
        assert not captured and why
        out, _ = box.call(timed=True, timeout=60)
        assert out.shape == (data[0].shape[0], 16, 512)


def test_graph_flag_on_cpu_says_it_times_plain_calls(tmp_path, capsys):
    from conftest import ROOT, cli

    code = cli(tmp_path, "--mode", "benchmark", "--graph", "--budget", "0.5",
               "--submission", str(ROOT / "submissions" / "torch_batched.py"))
    assert code == 0
    assert "--graph needs a GPU: timing plain calls." in capsys.readouterr().err
    row = sqlite3.connect(tmp_path / "r.db").execute("SELECT timing FROM runs").fetchone()
    assert row[0] == "CPU wall clock, unverified"  # the parent's clock around plain calls: not a GPU ranking


def test_flush_ops_are_valid_torch_calls():
    """The GPU flush's torch calls, run on CPU tensors (the GPU path is otherwise untested in CI)."""
    import torch

    from harness.worker.timer import CallTimer

    timer = object.__new__(CallTimer)
    timer.buffer = torch.ones(1 << 16, dtype=torch.uint8)
    timer._words = timer.buffer.view(torch.float32)
    timer._sink = torch.full((), 5.0)
    timer._sync, timer.flush_s, timer.flush = (lambda: None), 1e-5, "write+read"
    timer._host_times, timer._boost = collections.deque([1e-4], maxlen=CallTimer.HOST_WINDOW), 1.0
    buffer_at_reset = []   # the persisting-L2 reset runs first, before the flush's writes
    timer._reset_l2 = lambda: buffer_at_reset.append(int(timer.buffer.sum()))
    timer.prepare()
    assert buffer_at_reset == [1 << 16]
    assert int(timer.buffer.sum()) == 0 and float(timer._sink) == 0.0  # written, then read back


def test_busy_work_covers_the_slowest_recent_call_and_grows_when_the_gpu_caught_up():
    """The GPU timer's sizing and its caught-up report, with the CUDA calls replaced by fakes: the
    busy work covers BUSY_MARGIN x the longest of the last HOST_WINDOW host times, doubles after a
    timed call whose start event the GPU had passed before the call returned, and halves back."""
    from harness.worker.timer import CallTimer

    clock, passed, writes = [0.0], [False], []
    timer = object.__new__(CallTimer)
    timer.gpu, timer.flush_s, timer.flush = True, 10e-6, "write"
    timer._host_times, timer._boost = collections.deque(maxlen=CallTimer.HOST_WINDOW), 1.0
    timer._originals, timer._reset_l2 = {}, None
    timer._perf = lambda: clock[0]
    timer._sync = timer._event_sync = timer._record = lambda *a: None
    timer._event = lambda **kw: object()
    timer._elapsed = lambda begin, end: 0.02
    timer._query = lambda event: passed[0]
    timer.buffer = type("Buffer", (), {"zero_": lambda self: writes.append(1)})()

    def call(host_s, caught_up, timed=True):
        def fn(data):
            clock[0] += host_s
            passed[0] = caught_up
            return data
        writes.clear()
        clock[0] = 0.0
        out, timing = timer(fn, "x", timed=timed)
        assert out == "x" and timing["caught_up"] is caught_up and timing["host_s"] == host_s
        return len(writes)

    assert call(300e-6, False, timed=False) == 0            # untimed calls are not prepared
    assert timer.busy_seconds() == CallTimer.BUSY_MARGIN * 300e-6
    for _ in range(3):
        call(100e-6, False)
    assert timer.busy_seconds() == CallTimer.BUSY_MARGIN * 300e-6   # the slow call still counts
    assert call(100e-6, False) == 1 + 45                     # 450 µs of busy work in 10 µs writes
    call(100e-6, True)                                       # caught up: the next calls get twice as much
    assert timer.busy_seconds() == 2 * CallTimer.BUSY_MARGIN * 300e-6
    for _ in range(CallTimer.HOST_WINDOW):                   # the slow call leaves the window; clean calls halve the boost
        call(100e-6, False)
    assert timer.busy_seconds() == CallTimer.BUSY_MARGIN * 100e-6
    for _ in range(10):
        call(100e-6, True)
    assert timer._boost == CallTimer.MAX_BOOST
    assert call(100e-6, False) == CallTimer.MAX_BUSY_WRITES  # 8 x 150 µs: capped at ~2.5 ms


def test_caught_up_calls_warn_only_when_they_move_the_median():
    """A few calls that caught up are expected (the busy work grows after each); the warning names
    them when they move the median by more than CAUGHT_UP_SHIFT or are half the calls."""
    from harness.timing import caught_up_warnings

    times = [10e-6] * 8 + [30e-6] * 2
    assert caught_up_warnings([False] * 10, times) == ()
    assert caught_up_warnings([False] * 8 + [True] * 2, times) == ()           # the slow two: median unmoved
    times = [10e-6, 10.1e-6, 10.2e-6, 10.3e-6, 13e-6, 14e-6, 15e-6]
    flags = [False] * 4 + [True] * 3                                           # median 10.3 -> 10.15 without them
    assert caught_up_warnings(flags, times) == ()
    times = [10e-6, 10e-6, 10e-6, 12e-6, 12e-6, 12e-6, 12e-6]                 # median 12 -> 10 without the last three
    flags = [False, False, False, False, True, True, True]
    (warning,) = caught_up_warnings(flags, times)
    assert warning.startswith("launch-bound:") and "3 of 7 timed calls" in warning
    assert "10.0 µs (17% lower)" in warning
    (warning,) = caught_up_warnings([True] * 5 + [False] * 5, [10e-6] * 10)    # half the calls: always named
    assert "5 of 10" in warning and "may include waiting" in warning


def test_persisting_l2_reset_is_found_only_on_nvidia(monkeypatch):
    """The timer's reset is the driver's cuCtxResetPersistingL2Cache on CUDA builds, none elsewhere."""
    import ctypes

    import torch

    from harness.worker import timer

    monkeypatch.setattr(torch.version, "cuda", None)
    assert timer.persisting_l2_reset() is None   # this CPU build, and ROCm builds
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.version, "hip", "7.0")
    assert timer.persisting_l2_reset() is None
    monkeypatch.setattr(torch.version, "hip", None)

    class Driver:
        cuCtxResetPersistingL2Cache = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0)

    monkeypatch.setattr(ctypes, "CDLL", lambda name: Driver() if name == "libcuda.so.1" else None)
    reset = timer.persisting_l2_reset()
    assert reset is Driver.cuCtxResetPersistingL2Cache and reset() == 0

    monkeypatch.setattr(ctypes, "CDLL", lambda name: object())   # a driver without the call
    assert timer.persisting_l2_reset() is None

    def no_driver(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_driver)
    assert timer.persisting_l2_reset() is None


class _ScriptedCalls:
    """Stands in for the engine's inputs of one case: every output passes, each timed call reports
    the next scripted sync tail (device time 20 µs)."""

    def __init__(self, ctx, case, tails):
        import types

        self.ctx, self.case, self.box, self.tails = ctx, case, types.SimpleNamespace(fence=None), iter(tails)
        self.pristine = ctx.problem.generate(case.args, case.seed, ctx.device.torch_device)

    def refill(self, seed):
        pass

    def call(self, timed, deadline, mark=None):
        from harness.timing import CallTiming
        from harness.task.verdict import Verdict

        return Verdict(True, "matches"), CallTiming(20e-6, 30e-6, next(self.tails) if timed else 0.0, ())


@pytest.mark.parametrize("tails,ok,runs", [
    ([15e-6] * 100, True, 10),                         # clean: stops at min_runs
    ([60e-6] * 10 + [15e-6] * 90, True, 100),          # long first synchronizes: confirmed on 100, passes
    ([90e-6] * 100, False, 100),                       # work on a side stream: still over the line on 100
])
def test_a_median_tail_is_confirmed_on_more_calls_before_it_rejects(problem, cpu, tmp_path, tails, ok, runs):
    import dataclasses

    from harness.config import RunContext

    from harness.parent.engine import _benchmark_case
    from harness.config import RunConfig
    from harness.task.spec import Timing

    spec = dataclasses.replace(problem.spec, timing=Timing(warmup_calls=0, min_runs=10, max_runs=100,
                                                           max_seconds=1e-9, target_rel_ci=1e-9))
    ctx = RunContext(dataclasses.replace(problem, spec=spec), cpu, RunConfig(small=True, logs=str(tmp_path)))
    case = spec.cases("benchmark", small=True)[0]
    calls = _ScriptedCalls(ctx, case, tails)
    result = _benchmark_case(calls, "bf16", lambda *a, **k: None)
    assert result.ok is ok and len(list(calls.tails)) == 100 - runs
    assert ok or "median 90 µs after the end event" in result.reason


def test_the_databases_journal_exists_before_any_worker_and_stays(tmp_path, monkeypatch):
    # Where the database lies inside a folder the sandbox shows anyway (here: as if the Python prefix
    # held it), its files that exist when a worker starts are covered (harness/parent/allowlist.py); SQLite's
    # default journal is made and deleted at each write, so a worker running while the parent writes
    # could read old rows in it. The journal is made beforehand and kept.
    from harness.parent import allowlist
    from harness.parent.launch import _make_private

    db = tmp_path / "results" / "runs.db"
    _make_private([db, tmp_path / "logs"])
    monkeypatch.setattr(allowlist, "library_paths", lambda: [allowlist.Allowed(tmp_path, "a folder shown whole")])
    view = allowlist.allowed_paths(ROOT / "submissions" / "torch_batched.py", private=[db])
    hidden = {e.path for e in view if e.kind == "hide"}
    assert {db.resolve(), Path(f"{db}-journal").resolve()} <= hidden
    store = Store(db)
    store.start_run("test", "amd-mixed-mla", detect("cpu"), {})
    store.close()
    assert Path(f"{db}-journal").exists()


def test_history_and_compare_tell_files_of_the_same_name_apart(tmp_path):
    # A competitor's file named like another's must not merge into its history or its comparison.
    from harness.report import compare_table

    def result(path, us):
        case = CaseResult("benchmark", 0, "b0", True, device=summarize([us * 1e-6] * 5), args={"batchsize": 4})
        return SubmissionResult(path, "s", ok=True, cases=[case])

    store = Store(tmp_path / "r.db")
    runs = []
    for path, us in (("/a/kernel.py", 10.0), ("/b/kernel.py", 99.0)):
        run = store.start_run("leaderboard", "amd-mixed-mla", detect("cpu"), {}, check_policy="strict", cases="small")
        store.add_submission(run, result(path, us))
        store.finish_run(run)
        runs.append(run)
    rows = store.best_per_submission()
    assert sorted((r["name"], r["runs"], round(r["best_us"])) for r in rows) == [("a/kernel.py", 1, 10), ("b/kernel.py", 1, 99)]
    table = compare_table(runs[0], runs[1], store.timed_cases(runs[0]), store.timed_cases(runs[1]))
    assert table.row_count == 0  # the two runs share no submission


def test_history_counts_only_leaderboards_of_the_tasks_own_cases_per_file_version(tmp_path):
    """Red-team pass 15: a file that passes only another task's (or the competition's) check, or
    whose best came from a tiny --shape case, a benchmark run (no tests) or an older version of the
    file, must not show as its passing best beside files checked by the task's own leaderboard."""
    def result(sha, us):
        case = CaseResult("benchmark", 0, "b0", True, device=summarize([us * 1e-6] * 5), args={"batchsize": 4})
        return SubmissionResult("/x/kernel.py", sha, ok=True, cases=[case])

    store = Store(tmp_path / "r.db")
    for mode, task, check, cases, sha, us in (
            ("leaderboard", "amd-mixed-mla", "strict", "task", "a" * 64, 50.0),    # counts
            ("leaderboard", "amd-mixed-mla", "strict", "task", "a" * 64, 60.0),    # counts: same group
            ("leaderboard", "amd-mixed-mla", "strict", "custom", "a" * 64, 1.0),   # a --shape run
            ("benchmark", "amd-mixed-mla", "strict", "task", "a" * 64, 2.0),       # no tests
            ("leaderboard", "amd-mixed-mla", "strict", "", "a" * 64, 3.0),         # case set not recorded
            ("leaderboard", "amd-mixed-mla", "strict", "task", "b" * 64, 40.0),    # another version: own row
            ("leaderboard", "competition", "competition", "task", "a" * 64, 30.0)):  # another task: own row
        run = store.start_run(mode, task, detect("cpu"), {}, check_policy=check, cases=cases)
        store.add_submission(run, result(sha, us))
        store.finish_run(run)
    rows = {(r["version"], r["task"], r["check"]): (r["runs"], round(r["best_us"]), round(r["median_us"]))
            for r in store.best_per_submission()}
    assert rows == {("aaaaaaaa", "amd-mixed-mla", "strict"): (2, 50, 55),
                    ("bbbbbbbb", "amd-mixed-mla", "strict"): (1, 40, 40),
                    ("aaaaaaaa", "competition", "competition"): (1, 30, 30)}
    mine = store.best_per_submission(task="amd-mixed-mla", check="strict")   # what --history lists for the task
    assert sorted(r["version"] for r in mine) == ["aaaaaaaa", "bbbbbbbb"]
    old = store.start_run("leaderboard", "amd-mixed-mla", detect("cpu"), {})
    store.add_submission(old, result("a" * 64, 0.5))
    store.finish_run(old)
    store.db.execute("UPDATE runs SET cases = NULL, check_policy = NULL WHERE id = ?", (old,))  # as an older harness
    assert store.unlabelled_leaderboards() == 1 and len(store.best_per_submission()) == 3


LOCKER = """
import fcntl, sys, time
f = open(sys.argv[1], "rb")
fcntl.lockf(f, fcntl.LOCK_SH, 512, 0x40000000, 0)   # SQLite's lock bytes, shared: as a reader holds them
print("locked", flush=True)
time.sleep(60)
"""


def test_a_locked_database_is_one_line_before_anything_runs(tmp_path, capsys, monkeypatch):
    """Another process that read-locks the database (red-team pass 11: a submission of a run going on
    at the same time, which could open this file) made the run die with a traceback and stay
    'running'. Now a write waits BUSY_SECONDS, then the run stops with one line before it starts."""
    import subprocess
    import sys

    import harness.report.store
    from conftest import cli

    monkeypatch.setattr(harness.report.store, "BUSY_SECONDS", 0.5)
    Store(tmp_path / "r.db").close()
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(tmp_path / "r.db")], stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout.readline().strip() == "locked"
        code = cli(tmp_path, "--mode", "test", "--submission", str(ROOT / "submissions" / "torch_batched.py"))
    finally:
        locker.kill()
        locker.wait()
    err = capsys.readouterr().err
    assert code == 2 and "database is locked (nothing was run)" in err and "Traceback" not in err, err[-800:]


def test_a_result_the_database_refuses_costs_that_row_only(tmp_path, capsys, monkeypatch):
    """A write that fails mid-run (locked, disk full) is told at once; the run goes on, prints and
    exports every result, is marked complete, and exits non-zero."""
    import json

    from conftest import ZOO, cli

    from harness.report.store import StoreError

    real = Store.add_submission
    calls = []

    def refuse_first(self, run_id, result, label=None):
        calls.append(result.name)
        if len(calls) == 1:
            raise StoreError(f"{self.path}: database is locked")
        return real(self, run_id, result, label)

    monkeypatch.setattr(Store, "add_submission", refuse_first)
    out = tmp_path / "out.json"
    code = cli(tmp_path, "--mode", "test", "--json", str(out), "--submission", str(ZOO / "zeros.py"),
               "--submission", str(ROOT / "submissions" / "torch_batched.py"))
    err = capsys.readouterr().err
    assert code == 1 and "zeros.py: result not stored:" in err and "Traceback" not in err, err[-800:]
    assert "the results database failed: zeros.py not stored" in err
    assert {row["submission"] for row in json.loads(out.read_text())["rows"]} == {"zeros.py", "torch_batched.py"}
    run = Store(tmp_path / "r.db").runs()[0]
    assert run["status"] == "complete" and run["submissions"] == 1


def test_the_cpus_refill_runs_inside_the_calls_time(problem, cpu, tmp_path, monkeypatch):
    """On the CPU the parent's own clock is the call's time, so a timed call's new inputs reach the
    memory the worker holds only after that clock started: a worker thread watching its inputs
    could otherwise compute the answer while the parent refilled them (red-team pass 15)."""
    import time
    import types

    import torch

    from harness.parent import case as case_module
    from harness.config import RunConfig, RunContext
    from harness.parent import sandbox
    from harness.task.verdict import tensors

    events = []
    clock = iter(range(1000))
    monkeypatch.setattr(sandbox, "time", types.SimpleNamespace(
        perf_counter=lambda: events.append("clock") or float(next(clock)), monotonic=time.monotonic))
    box = object.__new__(sandbox.Sandbox)
    box.device = cpu
    box._send = lambda msg, fds=(): events.append(msg["op"])
    case = problem.spec.cases("benchmark", small=True)[0]
    ctx = RunContext(problem, cpu, RunConfig(small=True, logs=str(tmp_path)))
    inputs = case_module.CaseInputs(ctx, case, case_module.PhaseClock({}))
    shape, dtype = inputs.layout
    inputs.box = box
    inputs.data = problem.generate(case.args, case.seed ^ 1, cpu.torch_device)   # stands in for the shared copy
    box._slot = torch.zeros(shape, dtype=dtype)

    def answer(*_):
        events.append("answer")
        return {"op": "output", "device_s": 1e-3, "host_s": 1e-3, "tail_s": 0.0, "replaced": [],
                "layout": {"shape": list(shape), "dtype": str(dtype)[6:], "device": "cpu"}, "copied": False}

    box._answer = answer
    before = [t.clone() for _, t in tensors(inputs.data)]
    inputs.refill(12345)
    assert all(torch.equal(a, t) for a, (_, t) in zip(before, tensors(inputs.data)))  # nothing copied yet
    events.clear()
    real_copy = torch.Tensor.copy_
    targets = []
    monkeypatch.setattr(torch.Tensor, "copy_", lambda self, src, *a, **k: events.append("copy")
                        or targets.append(self.data_ptr()) or real_copy(self, src, *a, **k))
    inputs.call(timed=True, deadline=time.monotonic() + 10)
    monkeypatch.setattr(torch.Tensor, "copy_", real_copy)
    first_copy, last_copy = events.index("copy"), len(events) - 1 - events[::-1].index("copy")
    assert events.index("clock") < first_copy and last_copy < events.index("call") < events.index("answer"), events
    assert targets[-1] == inputs.data[0].data_ptr()  # q last: nothing can start on the answer before the copy ends
    assert all(torch.equal(s, p) for (_, s), (_, p) in zip(tensors(inputs.data), tensors(inputs.pristine)))


def test_export_names_the_launch_bound_calls():
    """The JSON export lists which timed calls caught up (the GPU may have waited for their
    launches), as indices into samples_us."""
    from harness.report import export_rows
    from harness.results import CaseResult, SubmissionResult
    from harness.timing import summarize

    samples = (14e-6, 300e-6, 14.2e-6, 260e-6)
    case = CaseResult("benchmark", 0, "b0", True, device=summarize(list(samples)), samples=samples,
                      caught_up=(False, True, False, True), bytes=1000)
    result = SubmissionResult("submissions/x.py", "0" * 64, cases=[case])
    (row,) = export_rows([result], lambda args: "4×1k", None)
    assert row["samples_us"] == [14.0, 300.0, 14.2, 260.0] and row["launch_bound_calls"] == [1, 3]


def test_a_gpu_cases_launch_bound_calls_reach_its_result_and_warning(problem):
    """The engine keeps each timed call's caught_up flag in order (CaseResult.caught_up, exported as
    launch_bound_calls) and, on a GPU, counts them in the slow-calls warning. A fake worker
    reports the calls, so the CPU runs the engine's own code with GPU flags."""
    import dataclasses

    from harness.parent.engine import _benchmark_case
    from harness.report import export_rows
    from harness.results import SubmissionResult
    from harness.timing import CallTiming
    from harness.task.verdict import Verdict

    spec = dataclasses.replace(problem.spec, timing=dataclasses.replace(problem.spec.timing, max_runs=30))
    us = [14.0, 300.0, 14.1, 280.0, 14.2, 290.0] + [14.0 + 0.01 * (i % 5) for i in range(24)]
    flags = [False, True, False, True, False, False] + [False] * 24     # two of the three slow calls caught up
    reports = iter(zip(us, flags))

    def call(timed, deadline):
        device_us, flag = next(reports) if timed else (20.0, False)
        return Verdict(True, "matches"), CallTiming(device_us * 1e-6, 1e-4, 0.0, (), caught_up=flag)

    inputs = gpu_case_inputs(spec, call)
    result = _benchmark_case(inputs, "bf16", lambda *a, **k: None)
    runs = len(result.samples)                     # the engine stops once the median's CI is tight
    assert result.ok and 6 < runs < 30 and result.caught_up == tuple(flags[:runs])
    assert result.warnings == (f"slow calls: 3 of {runs} took over 2x the median (up to 300.0 µs; 2 of them launch-bound)",)
    (row,) = export_rows([SubmissionResult("submissions/x.py", "0" * 64, cases=[result])], lambda args: "c", None)
    assert row["launch_bound_calls"] == [1, 3]


@pytest.mark.slow  # a worker, two CPU cases
def test_diagnostics_time_extra_calls_the_competitions_way_and_isolated_beside_the_ranked_number(problem, cpu,
                                                                                             tmp_path, monkeypatch):
    """--diagnostics: per benchmark case DIAGNOSTIC_CALLS more calls, each on fresh inputs and judged,
    timed the competition's way and as isolated calls by the worker; shown and exported beside the
    ranked median (comp µs, host overhead µs), never instead of it. (A run takes them on a GPU only:
    here the engine is made to take them on the CPU.)"""
    import dataclasses as dc

    from harness.config import RunContext

    from harness.parent.engine import DIAGNOSTIC_CALLS, evaluate
    from harness.config import RunConfig
    from harness.report import export_rows

    monkeypatch.setattr(RunContext, "diagnostics", property(lambda ctx: ctx.config.diagnostics))
    spec = dc.replace(problem.spec, timing=dc.replace(problem.spec.timing, max_seconds=0.05, max_runs=5))
    ctx = RunContext(dc.replace(problem, spec=spec), cpu, RunConfig(small=True, logs=str(tmp_path), diagnostics=True))
    result = evaluate(ROOT / "submissions" / "torch_batched.py", ctx, "benchmark")
    assert result.ok, result.error or [c.reason for c in result.cases if not c.ok]
    timed = [c for c in result.cases if c.kind == "benchmark"]
    assert timed and all(c.competition.runs == DIAGNOSTIC_CALLS == c.isolated.runs for c in timed)
    rows = export_rows([result], lambda args: "c", None)
    assert all(r["competition_us"] > 0 and r["host_overhead_us"] is not None for r in rows if r["kind"] == "benchmark")
    assert [r["median_us"] for r in rows if r["kind"] == "benchmark"] == [c.device.median * 1e6 for c in timed]
