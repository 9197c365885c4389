"""Command line: parse the flags into the run's one configuration (harness/cli/flags.py `configuration`),
check them, dispatch to a mode (history, compile, selftest, a vendor profiler, popcorn's positional
form, or an engine run, whose lifecycle is harness/cli/run.py's), set the exit code.

Exit codes: 0 every requested submission passed; 1 some submission failed; 2 bad usage or input;
130 interrupted (Ctrl-C); 143 terminated (SIGTERM).
"""

from __future__ import annotations

# first: importing harness.cli.run starts the run's wall clock (harness.cli.run.STARTED)
from harness.cli.run import run, run_popcorn, write_html

import dataclasses  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Optional, Sequence  # noqa: E402

from harness.cli.bundle import BundleError  # noqa: E402
from harness.config import RunConfig, UsageError  # noqa: E402
from harness.task.spec import MODES, SpecError  # noqa: E402
from harness.cli.flags import build_parser, configuration, shared_paths  # noqa: E402
from harness.cli.run_compile import cross_compile  # noqa: E402
from harness.cli.run_parallel import parallel  # noqa: E402
from harness.cli.selection import resolve_submissions  # noqa: E402

# torch (harness.device, harness.parent.engine, harness.report) is imported only after the first
# submission's worker has been started, so that both processes import it at the same time.

class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be, so that it takes the same way out."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated


def main(argv: Optional[Sequence[str]] = None) -> int:
    # SIGTERM (a job scheduler, `timeout`, a cancelled CI job) ends a run as Ctrl-C does: the run is
    # marked interrupted, its workers are stopped and their scratch removed. Python's default would
    # end this process on the spot: the run left `running`, scratch folders left in the temp folder.
    if threading.current_thread() is not threading.main_thread():  # (signal handlers live in the main thread)
        return _main(argv)
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: Optional[Sequence[str]]) -> int:
    try:
        config = configuration(build_parser().parse_args(argv), sys.argv[1:] if argv is None else argv)
    except BundleError as exc:  # (a --replay bundle that cannot be read or replayed here)
        from harness import report

        report.error(str(exc))
        return 2
    except KeyboardInterrupt as exc:  # (Ctrl-C or SIGTERM while a bundle or a task is read)
        return _interrupted(exc)
    early = _start_early(config) if config.popcorn_mode is None else None
    from harness import report
    from harness.device import DeviceError
    from harness.parent.launch import SandboxUnavailable

    try:
        if config.popcorn_mode is not None:
            if argv is None:  # a real command line: it can be run again without the secrets in its environment
                from harness.cli.popcorn import hide_secrets_and_reexec
                hide_secrets_and_reexec(sys.argv)
            return _popcorn(config)
        return _run(config, early)
    except (UsageError, SpecError, DeviceError, SandboxUnavailable) as exc:
        report.error(str(exc))
        return 2
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    finally:
        if early is not None:  # started, never adopted (closing an adopted worker again is harmless)
            early.close()


def _interrupted(exc: KeyboardInterrupt) -> int:
    """Ctrl-C (exit 130) or SIGTERM (143): one line."""
    from harness import report

    report.error("terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted")
    return 143 if isinstance(exc, Terminated) else 130


def _start_early(config: RunConfig):
    """Start the first submission's worker before this process imports torch (a sequential, sandboxed
    run of an engine mode only: a worker outside the sandbox could rewrite the modules this process
    has yet to import); None when that does not apply or the arguments are wrong (reported later)."""
    if config.mode not in MODES or config.history or config.ncu or config.rocprof or parallel(config) \
            or config.device not in (None, "cpu", "cuda") or config.sandbox == "off":
        return None
    from harness.parent.launch import log_path, sandbox_problem, start_worker

    if sandbox_problem() is not None:
        return None
    try:
        first = resolve_submissions(config.submission, config.exclude)[0]
        shared = shared_paths(config.share, config.private)
    except UsageError:
        return None
    try:
        return start_worker(first, config.device, log_path(Path(config.logs), first), sandbox=config.sandbox,
                            private=config.private, fence=_fence_daemon(config), shared=shared)
    except OSError:  # e.g. an unwritable log folder: the normal path reports it
        return None


def _fence_daemon(config: RunConfig) -> bool:
    """Start the run's MPS daemon where timed GPU calls will be fenced (harness/parent/mps.py), before this
    process or a worker makes a CUDA context; whether it runs."""
    if config.mode not in ("benchmark", "leaderboard") or config.no_audit or config.device == "cpu" \
            or config.backend == "ray":
        return False
    from harness.parent import mps

    return mps.start() is None


def _run(config: RunConfig, early=None) -> int:
    from harness.report.store import Store, StoreError

    _check_flags(config)
    if config.mode in MODES:
        try:
            Path(config.logs).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{config.logs}: cannot create the folder for worker logs ({exc.strerror})") from None
    try:
        store = Store(config.db)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    if config.mode == "history" or config.history:
        return _stored(config, store)
    problem = _load_problem(config)
    config = dataclasses.replace(config, cases=parse_shapes(config.shape, problem))
    submissions = resolve_submissions(config.submission, config.exclude) if config.mode != "selftest" else []
    if config.mode == "compile":
        return cross_compile(config, store, problem, submissions)
    if config.baseline:
        if config.mode not in ("benchmark", "leaderboard"):
            raise UsageError("--baseline goes with --mode benchmark or leaderboard")
        found = resolve_submissions([config.baseline])
        if len(found) != 1:
            raise UsageError(f"--baseline {config.baseline}: matches {len(found)} files; name one")
        (baseline,) = found
        config = dataclasses.replace(config, baseline=str(baseline))
        if baseline not in [p.resolve() for p in submissions]:
            submissions.append(baseline)
    return _on_device(config, store, problem, submissions, early)


def _check_flags(config: RunConfig) -> None:
    """UsageError for a mode or a flag that does not go with the mode, before anything is opened."""
    all_modes = MODES + ("selftest", "history", "compile")
    mode = config.mode
    if mode not in all_modes:
        raise UsageError(f"unknown mode {mode!r}: choose one of {', '.join(all_modes)}")
    if config.compare and mode != "history":
        raise UsageError("--compare goes with --mode history")
    if config.html and mode not in ("benchmark", "leaderboard", "history"):
        raise UsageError("--html goes with --mode benchmark, leaderboard or history (a page of timed results)")
    if config.energy and mode not in ("benchmark", "leaderboard"):
        raise UsageError("--energy goes with --mode benchmark or leaderboard (timed calls)")
    if config.diagnostics and mode not in ("benchmark", "leaderboard"):
        raise UsageError("--diagnostics goes with --mode benchmark or leaderboard (timed calls)")
    if config.bundle and (mode not in MODES or mode == "profile" or config.history):
        raise UsageError("--bundle goes with --mode test, benchmark or leaderboard (a run it can replay)")
    if config.seed is not None and not -2**63 <= config.seed < 2**63:
        raise UsageError(f"--seed {config.seed}: expected a whole number from -2**63 to 2**63 - 1")
    if config.history and mode != "leaderboard" and mode != "history":
        raise UsageError("--history goes with --mode leaderboard")
    if (mode == "history" or config.history and mode == "leaderboard") and not Path(config.db).is_file():
        raise UsageError(f"{config.db}: no database there (nothing has been stored yet); pass --db PATH")


def _stored(config: RunConfig, store) -> int:
    """--mode history (the runs, --compare, --html) and --history: what the database holds; nothing runs."""
    from harness import report
    from harness.report.store import StoreError

    report.err_console.print(f"database: {report.escape(config.db)}", highlight=False)
    if config.mode == "history":
        try:
            if config.html:
                write_html(store, config.html, None)
            elif config.compare:
                a, b = config.compare
                report.console.print(report.compare_table(a, b, store.timed_cases(a), store.timed_cases(b)))
            else:
                report.console.print(report.runs_table(store.runs(), db=config.db))
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        return 0
    problem = _load_problem(config)   # the task and check policy whose results it lists
    rows = store.best_per_submission(task=problem.spec.name, check=problem.check_policy)
    report.console.print(report.history_table(rows, problem.spec.name, problem.check_policy))
    older = store.unlabelled_leaderboards()
    if older:
        report.err_console.print(f"{older} leaderboard run(s) stored before runs recorded their cases are not "
                                 "listed (they may have timed custom --shape cases)")
    return 0


def parse_shapes(texts: Sequence[str], problem) -> Optional[tuple[dict[str, Any], ...]]:
    """--shape values as cases (checked against the task's generate_input), or None for the task's own."""
    import yaml

    from harness.task.spec import check_case

    cases = []
    for i, text in enumerate(texts):
        try:
            case = yaml.safe_load("{" + text.replace("=", ": ") + "}")
        except (yaml.YAMLError, RecursionError, ValueError):  # (lists nested thousands deep, 5,000-digit numbers)
            case = None
        if not isinstance(case, dict) or not case or "=" not in text or None in case.values():
            raise UsageError(f"--shape {text!r}: expected KEY=VALUE pairs separated by commas")
        case.setdefault("seed", 1000 + i)
        check_case({**problem.spec.case_defaults, **case}, f"--shape {text!r}", problem.reference.generate_input)
        cases.append(case)
    return tuple(cases) or None


def _on_device(config: RunConfig, store, problem, submissions: list[Path], early) -> int:
    """The modes that need the device: selftest, a vendor profiler, else an engine run (harness/cli/run.py)."""
    from harness import report
    from harness.device import detect

    _fence_daemon(config)
    device = detect(config.device)
    small = config.small or not device.is_gpu
    if not device.is_gpu:
        report.err_console.print("No GPU in use: running on the CPU with the task's small shapes.")
    if config.mode == "selftest":
        return _selftest(problem, device, small)
    if config.ncu or config.rocprof:
        return _vendor_profile(config, problem, device, submissions, small)
    return run(config, store, problem, submissions, device, early)


def _load_problem(config: RunConfig):
    """The task, with the command line's check policy and time budget applied."""
    from harness.task.problem import configured, load_problem

    return configured(load_problem(config.task), config.check, config.budget, config.timeout)


def _popcorn(config: RunConfig) -> int:
    """kernelbot's way in: results as `key: value` lines on POPCORN_FD, GPU MODE's exit codes."""
    from harness.cli import popcorn
    from harness import report
    from harness.device import detect
    from harness.task.spec import check_case

    fd, seed = popcorn.take_secrets()  # first: no worker may ever see these
    mode = config.popcorn_mode
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r}: choose one of {', '.join(MODES)}")
    if fd is None:
        report.error("POPCORN_FD is not set (or not a number): the positional form reports through that pipe")
        return popcorn.EXIT_NO_PIPE
    if config.testfile is None:
        raise UsageError(f"usage: eval.py {mode} TESTFILE")
    from harness.parent.launch import sandbox_problem

    if sandbox_problem() is not None:  # before any work: this form never runs a submission unfenced
        raise UsageError(f"the popcorn protocol requires the OS sandbox: {sandbox_problem()}")
    problem = _load_problem(config)
    try:
        cases = popcorn.parse_testfile(config.testfile)
        for i, case in enumerate(cases):
            check_case({**problem.spec.case_defaults, **case}, f"{config.testfile}:{i + 1}",
                       problem.reference.generate_input)
    except (popcorn.BadTestFile, SpecError) as exc:
        report.error(str(exc))
        return popcorn.EXIT_BAD_TESTFILE
    submission = resolve_submissions(config.submission or ["submission.py"])[0]
    config = dataclasses.replace(config, mode=mode, seed=seed, sandbox="require", cases=tuple(cases))
    _fence_daemon(config)
    device = detect(config.device)
    os.set_inheritable(fd, False)
    with os.fdopen(fd, "w", buffering=1) as out:
        passed = run_popcorn(config, submission, device, out)
    return popcorn.EXIT_OK if passed else popcorn.EXIT_CHECK_FAILED


def _vendor_profile(config: RunConfig, problem, device, submissions: list[Path], small: bool) -> int:
    from harness import report
    from harness.parent.launch import SandboxUnavailable
    from harness.parent.vendor_profile import ProfilerMissing, run_vendor_profiler

    tool = "ncu" if config.ncu else "rocprof"
    if config.mode != "profile" or (config.ncu and config.rocprof) or len(submissions) != 1:
        raise UsageError(f"--{tool} goes with --mode profile and exactly one --submission")
    cases = problem.spec.cases("benchmark", small)
    if not 0 <= config.case < len(cases):
        raise UsageError(f"--case {config.case}: the task has benchmark cases 0..{len(cases) - 1}")
    try:
        report_path, summary = run_vendor_profiler(tool, device.vendor, Path(problem.spec.path), submissions[0],
                                                   config.case, Path(config.logs).parent / "profiles", config.sandbox,
                                                   config.private)
    except (ProfilerMissing, SandboxUnavailable) as exc:
        raise UsageError(str(exc)) from None
    except RuntimeError as exc:
        report.error(str(exc))
        return 1
    from harness.worker.channel import printable

    for line in summary.splitlines():  # (kernel names and, from rocprof, the profiled process's own output)
        report.console.print(printable(line), markup=False, highlight=False, emoji=False)
    report.err_console.print(f"{tool} report: {report.escape(str(report_path))}")
    return 0


def _selftest(problem, device, small: bool) -> int:
    from harness import report
    from harness.task.selftest import run_selftest

    report.err_console.print(f"selftest of check policy '{problem.check_policy}' on {device.describe()}")
    rows = run_selftest(problem, device, small,
                        progress=lambda case: report.err_console.print(f"  {case.kind} {problem.label(case.args)}"))
    report.console.print(report.selftest_table(rows, problem.label, problem.check_policy))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
