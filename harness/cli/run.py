"""A run's lifecycle, once the command line has been parsed and checked (harness/cli/__init__.py): the
sandbox line, the parent's imports done before any worker starts, the copy bandwidth, the run in the
database (started, ended if it breaks, finished), every submission evaluated (one after another in
this process, or by the pool or Ray; each printed as it finishes by report.show_finished), and the
run's summary: the leaderboard, exports, plots, wall time and exit code. Also popcorn's one evaluation, and a
--mode compile run (its cross-compile reports stored and exported).

Nothing at module level imports torch (harness.device, harness.parent.engine, harness.report): cli.py
imports this module before the first worker has been started (cli._start_early).
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()  # the run's wall time counts everything after this (cli.py imports this first)

import contextlib  # noqa: E402
import functools  # noqa: E402
import dataclasses  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import IO, TYPE_CHECKING, Any, Callable, Optional  # noqa: E402

from harness.config import UsageError, timeouts_text  # noqa: E402
from harness.cli.flags import shared_paths  # noqa: E402
from harness.cli.run_parallel import evaluate_parallel, parallel, pool_plan  # noqa: E402

if TYPE_CHECKING:
    from harness.config import RunConfig, RunContext
    from harness.device import DeviceInfo
    from harness.task.problem import Problem
    from harness.results import SubmissionResult
    from harness.report.store import Store


@contextlib.contextmanager
def _run_row(store: Store, start: Callable[[], int], finish: Callable[[int], None], unstored: list[str]):
    """A run's row in the database around the work of a run (`with ... as run_id`): `start()` makes
    it (a database that refuses: one line, nothing run); the row is marked interrupted or failed if
    the work raises; `finish(run_id)` marks it complete after, and a database that refuses that is
    listed in `unstored` (the run's results are all printed and exported regardless)."""
    from harness.report.store import StoreError

    try:
        run_id = start()
    except StoreError as exc:
        raise UsageError(f"{exc} (nothing was run)") from None
    try:
        yield run_id
    except BaseException as exc:
        with contextlib.suppress(StoreError):  # (the database may be what failed)
            store.end_run(run_id, "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed")
        raise
    try:
        finish(run_id)
    except StoreError as exc:
        unstored.append(f"run {run_id} not marked complete ({exc})")


def _run_banner(config: RunConfig, problem: Problem, device: DeviceInfo, count: int) -> None:
    """The lines a run starts with: device, task, mode, check, timeouts, and what CPU timings are."""
    from harness import report

    report.err_console.print(f"device: {device.describe()}  ·  task: {problem.spec.name}  ·  "
                             f"{count} submission(s)  ·  mode: {config.mode}  ·  check: {problem.check_policy}"
                             + ("  ·  timing: CUDA-graph replays" if config.graph else ""))
    report.err_console.print(f"timeouts: {timeouts_text(dataclasses.asdict(problem.spec.timeouts))} "
                             + (f"(--timeout {config.timeout:g})" if config.timeout else
                                "(the task's; --timeout SECONDS lowers them)"), highlight=False)
    if config.graph and not device.is_gpu:
        report.err_console.print("--graph needs a GPU: timing plain calls.")
    if not device.is_gpu and config.mode in ("benchmark", "leaderboard"):
        report.err_console.print("warning: CPU timings (this process's clock around each call; Triton kernels in its "
                                 "interpreter) are not comparable between runs or with GPU numbers: identical runs "
                                 "have differed many times over. Use them to see that timing works, not to rank.")


def _bandwidth(store: Store, device: DeviceInfo) -> Optional[float]:
    """The GPU's copy bandwidth, measured every run (a stored figure is only as trustworthy as the run
    that wrote it) and stored; None on the CPU."""
    from harness import report
    from harness.device import measure_copy_bandwidth

    if not device.is_gpu:
        return None
    bandwidth = measure_copy_bandwidth()
    from harness.report.store import StoreError

    try:
        store.save_bandwidth(device.name, bandwidth)
    except StoreError as exc:
        raise UsageError(f"{exc} (nothing was run)") from None
    report.err_console.print(f"copy bandwidth {bandwidth / 1e12:.2f} TB/s (measured now)")
    return bandwidth


def run(config: RunConfig, store: Store, problem: Problem, submissions: list[Path], device: DeviceInfo,
        early=None) -> int:
    """Evaluate `submissions` in an engine mode (test, benchmark, leaderboard, profile) as one stored
    run, print each as it finishes and the summary; the exit code. `early`: the first submission's
    worker, started before this process imported torch (or None)."""
    from harness import report
    from harness.device import versions
    from harness.parent.context import run_context
    from harness.task.selftest import lax_check

    _run_banner(config, problem, device, len(submissions))
    sandboxed = _sandbox_line(config.sandbox)
    _import_parent_modules(config)

    ctx = run_context(_for_evaluators(config, _bandwidth(store, device)))
    for line in config.replay_notes:
        report.err_console.print(f"replay: {report.escape(line)}", highlight=False)
    if config.energy and config.mode in ("benchmark", "leaderboard") \
            and (ctx.watch is None or ctx.watch.energy() is None):
        why = ctx.watch.note if ctx.watch is not None and not ctx.watch.available else "the GPU has no energy counter"
        report.err_console.print(f"--energy: {report.escape(why)}: no energy figures")
    try:  # (also the first case's inputs made once: a value generate_input refuses is one line here)
        lax = lax_check(ctx.problem, device, ctx.small) if config.mode in ("test", "leaderboard") else ""
    except ValueError as exc:
        raise UsageError(f"{problem.spec.path}: the first test case's inputs: {exc}") from None
    if lax:
        report.err_console.print(f"[bold yellow]warning: {report.escape(lax)}: a pass under it proves little[/]")
    pool = pool_plan(config, device) if parallel(config) else None
    unstored: list[str] = []
    method = timing_method(ctx, pool)
    start = functools.partial(store.start_run, config.mode, problem.spec.name, device, versions(),
                              method, sandboxed=sandboxed,
                              check_policy=problem.check_policy,
                              cases="custom" if config.cases else "small" if ctx.small else "task")
    with _run_row(store, start, functools.partial(store.finish_run, secret=ctx.secret), unstored) as run_id:
        began = time.perf_counter()  # the evaluations (startup: everything before)
        results = _evaluate_all(ctx, store, run_id, submissions, pool, early, unstored)
    code = _finish(ctx, results, run_id, sandboxed, began, method)
    if config.html:  # from the database, the run just stored included
        write_html(store, config.html, run_id)
    if unstored:  # after the tables and exports, which hold every result
        report.error(f"the results database failed: {'; '.join(unstored)[:600]}; the results above and in any "
                     "--json/--csv export are complete")
        return max(code, 1)
    return code


def run_popcorn(config: RunConfig, submission: Path, device: DeviceInfo, out: IO[str]) -> bool:
    """popcorn's one evaluation (harness/cli/popcorn.py): `submission` as `config` says (popcorn's mode,
    seed and cases, always sandboxed), its result written to `out` as `key: value` lines; whether it
    passed."""
    from harness.cli import popcorn
    from harness.device import measure_copy_bandwidth
    from harness.parent.context import run_context
    from harness.parent.engine import evaluate

    config = _for_evaluators(config, measure_copy_bandwidth() if device.is_gpu else None)
    result = contained(submission, lambda: evaluate(submission, run_context(config), config.mode))
    return popcorn.write_result(out, config.mode, result)


def contained(path: Path, evaluation: Callable[[], SubmissionResult]) -> SubmissionResult:
    """`evaluation()`, or, when the parent itself fails while evaluating this file (a file can
    find such faults: an expression nested too deep for `ast.parse`), a failed result for this file
    only, "harness error: ...", as the pool's evaluators report it; the run goes on."""
    from harness.parent.pool import harness_error

    try:
        return evaluation()
    except Exception as exc:
        return harness_error(path, exc)


def _sandbox_line(mode: str) -> bool:
    """Say whether workers run in the OS sandbox (loudly when not); refuse under --sandbox require."""
    from harness import report
    from harness.parent.launch import sandbox_problem

    if mode == "off":
        report.err_console.print("[bold red]WARNING: --sandbox off: submissions run as plain child processes and can "
                                 "change files, the database and this process; results are marked unsandboxed[/]")
        return False
    why = sandbox_problem()
    if why is None:
        return True
    if mode == "require":
        raise UsageError(f"--sandbox require: {why}")
    report.err_console.print(f"[bold red]WARNING: no OS sandbox: {why}. Submissions run unfenced and every result "
                             "is marked unsandboxed (--sandbox require refuses instead)[/]")
    return False


def _import_parent_modules(config: RunConfig) -> None:
    """Everything this process will import, imported before any worker starts (unsandboxed, a worker
    could otherwise plant or rewrite a module this process loads later); and the outputs checked,
    so a missing folder or matplotlib is one line before the run, not a lost result after it."""
    import harness.parent.audit  # noqa: F401
    import harness.parent.pool  # noqa: F401 (its `harness_error`, for a file the parent itself failed on)
    import harness.task.selftest  # noqa: F401
    import harness.parent.scan  # noqa: F401 (imports kernelguard)
    if config.html:
        import harness.report.html_report  # noqa: F401 (imported before any worker starts, as everything here)
    if config.plot:
        from harness.report.plots import PlotError, _pyplot

        try:
            _pyplot()
        except PlotError as exc:
            raise UsageError(str(exc)) from None
    for flag, path in (("--json", config.json), ("--csv", config.csv), ("--markdown", config.markdown),
                       ("--html", config.html), ("--bundle", config.bundle)):
        if path and not Path(path).parent.is_dir():  # (--plot makes its folder)
            raise UsageError(f"{flag} {path}: the folder {Path(path).parent} does not exist")


def write_html(store: Store, path: str, run_id: Optional[int]) -> None:
    """--html: the page of run `run_id` (the newest timed run where None) and its files' history."""
    from harness import report
    from harness.report.html_report import PageError, write_page

    try:
        report.err_console.print(f"page: {write_page(store, path, run_id)}")
    except PageError as exc:
        raise UsageError(str(exc)) from None


def _for_evaluators(config: RunConfig, bandwidth: Optional[float]) -> RunConfig:
    """`config` as the evaluators take it: with the measured copy bandwidth and --share's paths
    checked and resolved (UsageError)."""
    return dataclasses.replace(config, bandwidth=bandwidth, shared=shared_paths(config.share, config.private))


def _evaluate_all(ctx: RunContext, store: Store, run_id: int, submissions: list[Path],
                  pool: Optional[tuple[int, int]], early, unstored: list[str]) -> list[SubmissionResult]:
    """Every submission evaluated (in this process, or by the pool's evaluators) and stored as it
    finishes; a result the database refuses is told at once and listed in `unstored`, and the run
    goes on."""
    from harness import report
    from harness.device import CONTEXT_LOST, context_ok
    from harness.parent.engine import evaluate, plan
    from harness.parent.pool import failed
    from harness.results import display_names
    from harness.report.store import StoreError

    config = ctx.config
    names = display_names([str(p) for p in submissions])

    def record(result: SubmissionResult) -> None:
        if names.get(result.path, result.name) != result.name:
            result.display = names[result.path]
        try:
            store.add_submission(run_id, result, ctx.problem.label)
        except StoreError as exc:
            unstored.append(f"{result.name} not stored ({exc})")
            report.error(f"{result.name}: result not stored: {exc}")
        report.show_finished(config.mode, result, problem.label, len(submissions), ctx.bandwidth)

    problem = ctx.problem
    if pool is not None:
        results = evaluate_parallel(config, ctx.device, submissions, record, *pool)
    else:
        results = []
        n_cases = len(plan(problem.spec, config.mode, ctx.small))
        for i, path in enumerate(submissions):
            def one(path: Path = path, i: int = i) -> SubmissionResult:
                with report.LiveProgress(path.name, n_cases, enabled=not config.no_progress) as progress:
                    # the first one adopts the worker started before torch was imported
                    return evaluate(path, ctx, config.mode, progress, started=early if i == 0 else None)

            result = contained(path, one)
            lost = not context_ok(ctx.device)
            if lost:
                result = failed(path, CONTEXT_LOST) if result.ok else result
                result.error = result.error or CONTEXT_LOST
            results.append(result)
            record(result)
            if lost and submissions[i + 1:]:  # this process's GPU context is gone, and the MPS server with
                # it for as long as this process lives (a new client then gets no GPU: BENCHMARKS.md)
                report.error(f"{path.name} ended the harness's GPU context: the remaining {len(submissions) - i - 1} "
                             "file(s) are not run; run them again")
                for later in submissions[i + 1:]:
                    result = failed(later, f"not run: the harness's GPU context was lost while {path.name} ran")
                    results.append(result)
                    record(result)
                break
    return results


def _finish(ctx: RunContext, results: list[SubmissionResult], run_id: int,
            sandboxed: bool, began: float, method: str) -> int:
    """The run's summary: leaderboard table, exports, plots, where the results went, wall time."""
    from harness import report
    from harness.device import versions

    from harness.parent.energy import ENERGY_METHOD
    from harness.parent.gpuwatch import run_line
    from harness.report.store import git_commit

    config, problem, device, bandwidth = ctx.config, ctx.problem, ctx.device, ctx.bandwidth

    clocks = run_line([(f"{r.name} {problem.label(c.args) if c.args else c.name}", c) for r in results
                       for c in r.cases if c.kind == "benchmark"],
                      ctx.watch.note if ctx.watch is not None and device.is_gpu else "")
    meta = {"run": run_id, "mode": config.mode, "task": problem.spec.name, "device": device.describe(),
            "check": problem.check_policy, "timing": method, "ranked_by": ctx.fence,
            "bandwidth_TBps": round(bandwidth / 1e12, 3) if bandwidth else None, "sandboxed": sandboxed,
            "git_commit": git_commit(), "seed": ctx.secret, **versions(), "clocks": clocks,
            "energy": ENERGY_METHOD if ctx.energy else None}
    # the exports first: nothing the tables below show can cost them
    report.write_exports(results, problem.label, bandwidth, meta, config.json, config.csv, config.markdown,
                         ranking=problem.spec.ranking)
    bundled = _write_bundle(ctx, results, meta, clocks) if config.bundle else True
    if config.mode == "leaderboard":
        report.console.print(report.leaderboard_table(results, problem.label, device.describe(), bandwidth,
                                                      problem.spec.ranking))
    if config.baseline:
        base = next(r for r in results if Path(r.path).resolve() == Path(config.baseline))
        report.console.print(report.baseline_table(results, base, problem.label, problem.spec.ranking))
    if config.plot and config.mode in ("benchmark", "leaderboard"):
        from harness.report.plots import PlotError, write_plots

        try:
            for path in write_plots(results, problem.label, bandwidth, device.describe(), config.plot):
                report.err_console.print(f"plot: {path}")
        except PlotError as exc:
            report.error(str(exc))
    same = _replay_verdict(config, results, problem, bandwidth) if config.replay else True
    if clocks:
        report.err_console.print(report.escape(clocks), highlight=False)
    report.err_console.print(f"results stored in {config.db} (run {run_id})")
    now = time.perf_counter()
    report.err_console.print(f"wall {now - STARTED:.1f} s: startup {began - STARTED:.1f} s (imports, device, "
                             f"task, database), evaluations {now - began:.1f} s", highlight=False)
    if not all(r.ok for r in results):
        report.err_console.print(f"to run on exactly these inputs again: --seed {ctx.secret}")
    return 0 if all(r.ok for r in results) and bundled and same else 1


def _write_bundle(ctx: RunContext, results: list[SubmissionResult], meta: dict[str, Any],
                  clocks: Optional[str]) -> bool:
    """--bundle: the run's replay bundle (harness/cli/bundle.py); whether it was written."""
    from harness.cli import bundle
    from harness import report

    problem = ctx.problem
    try:
        doc = report.json_document(results, problem.label, ctx.bandwidth, meta, problem.spec.ranking)
        data = bundle.build(ctx.config, [(r.path, r.name, r.sha256) for r in results], doc,
                            bundle.environment(ctx.device, ctx.watch, clocks))
        path = bundle.write(ctx.config.bundle, data)
    except (bundle.BundleError, OSError) as exc:
        report.error(str(exc) if isinstance(exc, bundle.BundleError) else f"--bundle {ctx.config.bundle}: {exc}")
        return False
    report.err_console.print(f"replay bundle: {report.escape(str(path))} ({report.command()} --replay "
                             f"{report.escape(str(path))} runs it again)", highlight=False)
    return True


def _replay_verdict(config: RunConfig, results: list[SubmissionResult], problem: Problem,
                    bandwidth: Optional[float]) -> bool:
    """--replay: the comparison with the bundle's results, per case, and its one-line summary;
    whether every verdict was the same."""
    from harness.cli import bundle
    from harness import report

    names = dict(config.replayed_names)  # (the replay's copies have other names: rows pair by the bundled one)
    rename = {r.name: names.get(str(Path(r.path).resolve()), r.name) for r in results}
    rows = bundle.comparison(config.replayed, [{**row, "submission": rename.get(row["submission"], row["submission"])}
                                               for row in report.export_rows(results, problem.label, bandwidth,
                                                                             problem.spec.ranking)],
                             config.replayed_sha256)
    report.console.print(report.replay_table(rows))
    line, same = bundle.summary(rows)
    report.err_console.print(report.escape(line), highlight=False)
    return same


def timing_method(ctx: RunContext, pool: Optional[tuple[int, int]] = None) -> str:
    """What a run's timed numbers are, stored with the run (--mode history groups by it, --compare
    says when two runs differ): the parent's fenced clock, the worker's own events (unverified), or
    the CPU's clock (a CPU machine, or a pool of --gpus 0 on a GPU machine)."""
    from harness.results import CPU_TIMING_METHOD

    if not ctx.device.is_gpu or (pool is not None and pool[0] == 0):
        return CPU_TIMING_METHOD
    how = "CUDA graphs" if ctx.graph else "events"
    # (the fence's calibration in the label: numbers measured less another hand-over are not compared as alike)
    return f"fenced, dispatch subtracted ({how})" if ctx.fence == "fenced" else f"{how}, unverified"
