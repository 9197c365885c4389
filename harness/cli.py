"""Command line: parse the flags, check them, dispatch to a mode (history, compile, selftest, a
vendor profiler, popcorn's positional form, or an engine run, whose lifecycle is harness/run.py's),
set the exit code.

Exit codes: 0 every requested submission passed; 1 some submission failed; 2 bad usage or input;
130 interrupted (Ctrl-C); 143 terminated (SIGTERM).
"""

from __future__ import annotations

# first: importing harness.run starts the run's wall clock (harness.run.STARTED)
from harness.run import run, run_popcorn, write_html

import argparse  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Optional, Sequence  # noqa: E402

from harness.config import UsageError  # noqa: E402
from harness.spec import MODES, SpecError  # noqa: E402
from harness.flags import build_parser, private_paths, shared_paths, task_path  # noqa: E402
from harness.run_compile import cross_compile  # noqa: E402
from harness.run_parallel import parallel  # noqa: E402
from harness.selection import resolve_submissions  # noqa: E402
from harness.store import results_folder  # noqa: E402

# torch (harness.device, harness.engine, harness.report) is imported only after the first
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
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # (recorded in a --bundle)
    if args.replay:
        from harness import bundle

        try:
            args.replay_notes = bundle.replay_args(bundle.read(args.replay), args, bundle.workdir(),
                                                  build_parser().parse_args([]))
        except bundle.BundleError as exc:
            from harness import report

            report.error(str(exc))
            return 2
    if args.db is None or args.logs is None:
        # kernelbot's form runs in a folder of its own per submission: its results stay there
        folder = Path.cwd() / "results" if args.popcorn_mode is not None else results_folder()
        args.db = args.db or str(folder / "mla-eval.db")
        args.logs = args.logs or str(folder / "logs")
    early = _start_early(args) if args.popcorn_mode is None else None
    from harness import report
    from harness.device import DeviceError
    from harness.launch import SandboxUnavailable

    try:
        if args.popcorn_mode is not None:
            if argv is None:  # a real command line: it can be run again without the secrets in its environment
                from harness.popcorn import hide_secrets_and_reexec
                hide_secrets_and_reexec(sys.argv)
            return _popcorn(args)
        return _run(args, early)
    except (UsageError, SpecError, DeviceError, SandboxUnavailable) as exc:
        report.error(str(exc))
        return 2
    except Terminated:
        report.error("terminated (SIGTERM)")
        return 143
    except KeyboardInterrupt:
        report.error("interrupted")
        return 130
    finally:
        if early is not None:  # started, never adopted (closing an adopted worker again is harmless)
            early.close()


def _start_early(args: argparse.Namespace):
    """Start the first submission's worker before this process imports torch (a sequential, sandboxed
    run of an engine mode only: a worker outside the sandbox could rewrite the modules this process
    has yet to import); None when that does not apply or the arguments are wrong (reported later)."""
    if args.mode not in MODES or args.history or args.ncu or args.rocprof or parallel(args) \
            or args.device not in (None, "cpu", "cuda") or args.sandbox == "off":
        return None
    from harness.launch import log_path, sandbox_problem, start_worker

    if sandbox_problem() is not None:
        return None
    try:
        first = resolve_submissions(args.submission, args.exclude)[0]
        shared = shared_paths(args)
    except UsageError:
        return None
    try:
        return start_worker(first, args.device, log_path(Path(args.logs), first), sandbox=args.sandbox,
                            private=private_paths(args), fence=_fence_daemon(args, args.mode), shared=shared)
    except OSError:  # e.g. an unwritable log folder: the normal path reports it
        return None


def _fence_daemon(args: argparse.Namespace, mode: str) -> bool:
    """Start the run's MPS daemon where timed GPU calls will be fenced (harness/mps.py), before this
    process or a worker makes a CUDA context; whether it runs."""
    if mode not in ("benchmark", "leaderboard") or args.no_audit or args.device == "cpu" or args.backend == "ray":
        return False
    from harness import mps

    return mps.start() is None


def _run(args: argparse.Namespace, early=None) -> int:
    from harness.store import Store, StoreError

    _check_flags(args)
    if args.mode in MODES:
        try:
            Path(args.logs).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{args.logs}: cannot create the folder for worker logs ({exc.strerror})") from None
    try:
        store = Store(args.db)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    if args.mode == "history" or args.history:
        return _stored(args, store)
    problem = _load_problem(args)
    args.shape = parse_shapes(args.shape, problem)
    submissions = resolve_submissions(args.submission, args.exclude) if args.mode != "selftest" else []
    if args.mode == "compile":
        return cross_compile(args, store, problem, submissions)
    if args.baseline:
        if args.mode not in ("benchmark", "leaderboard"):
            raise UsageError("--baseline goes with --mode benchmark or leaderboard")
        baseline = resolve_submissions([args.baseline])
        if len(baseline) != 1:
            raise UsageError(f"--baseline {args.baseline}: matches {len(baseline)} files; name one")
        (args.baseline,) = baseline
        if args.baseline not in [p.resolve() for p in submissions]:
            submissions.append(args.baseline)
    return _on_device(args, store, problem, submissions, early)


def _check_flags(args: argparse.Namespace) -> None:
    """UsageError for a mode or a flag that does not go with the mode, before anything is opened."""
    all_modes = MODES + ("selftest", "history", "compile")
    if args.mode not in all_modes:
        raise UsageError(f"unknown mode {args.mode!r}: choose one of {', '.join(all_modes)}")
    if args.compare and args.mode != "history":
        raise UsageError("--compare goes with --mode history")
    if args.html and args.mode not in ("benchmark", "leaderboard", "history"):
        raise UsageError("--html goes with --mode benchmark, leaderboard or history (a page of timed results)")
    if args.energy and args.mode not in ("benchmark", "leaderboard"):
        raise UsageError("--energy goes with --mode benchmark or leaderboard (timed calls)")
    if args.diagnostics and args.mode not in ("benchmark", "leaderboard"):
        raise UsageError("--diagnostics goes with --mode benchmark or leaderboard (timed calls)")
    if args.bundle and (args.mode not in MODES or args.mode == "profile" or args.history):
        raise UsageError("--bundle goes with --mode test, benchmark or leaderboard (a run it can replay)")
    if args.seed is not None and not -2**63 <= args.seed < 2**63:
        raise UsageError(f"--seed {args.seed}: expected a whole number from -2**63 to 2**63 - 1")
    if args.history and args.mode != "leaderboard" and args.mode != "history":
        raise UsageError("--history goes with --mode leaderboard")
    if (args.mode == "history" or args.history and args.mode == "leaderboard") and not Path(args.db).is_file():
        raise UsageError(f"{args.db}: no database there (nothing has been stored yet); pass --db PATH")


def _stored(args: argparse.Namespace, store) -> int:
    """--mode history (the runs, --compare, --html) and --history: what the database holds; nothing runs."""
    from harness import report
    from harness.store import StoreError

    report.err_console.print(f"database: {report.escape(args.db)}", highlight=False)
    if args.mode == "history":
        try:
            if args.html:
                write_html(store, args.html, None)
            elif args.compare:
                a, b = args.compare
                report.console.print(report.compare_table(a, b, store.timed_cases(a), store.timed_cases(b)))
            else:
                report.console.print(report.runs_table(store.runs(), db=args.db))
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        return 0
    problem = _load_problem(args)   # the task and check policy whose results it lists
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

    from harness.spec import check_case

    cases = []
    for i, text in enumerate(texts):
        try:
            case = yaml.safe_load("{" + text.replace("=", ": ") + "}")
        except yaml.YAMLError:
            case = None
        if not isinstance(case, dict) or not case or "=" not in text or None in case.values():
            raise UsageError(f"--shape {text!r}: expected KEY=VALUE pairs separated by commas")
        case.setdefault("seed", 1000 + i)
        check_case({**problem.spec.case_defaults, **case}, f"--shape {text!r}", problem.reference.generate_input)
        cases.append(case)
    return tuple(cases) or None


def _on_device(args: argparse.Namespace, store, problem, submissions: list[Path], early) -> int:
    """The modes that need the device: selftest, a vendor profiler, else an engine run (harness/run.py)."""
    from harness import report
    from harness.device import detect

    _fence_daemon(args, args.mode)
    device = detect(args.device)
    small = args.small or not device.is_gpu
    if not device.is_gpu:
        report.err_console.print("No GPU in use: running on the CPU with the task's small shapes.")
    if args.mode == "selftest":
        return _selftest(problem, device, small)
    if args.ncu or args.rocprof:
        return _vendor_profile(args, problem, device, submissions, small)
    return run(args, store, problem, submissions, device, early)


def _load_problem(args: argparse.Namespace):
    """The task, with the command line's check policy and time budget applied."""
    from harness.problem import configured, load_problem

    return configured(load_problem(task_path(args.task)), args.check, args.budget, args.timeout)


def _popcorn(args: argparse.Namespace) -> int:
    """kernelbot's way in: results as `key: value` lines on POPCORN_FD, GPU MODE's exit codes."""
    from harness import popcorn, report
    from harness.device import detect
    from harness.spec import check_case

    fd, seed = popcorn.take_secrets()  # first: no worker may ever see these
    mode = args.popcorn_mode
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r}: choose one of {', '.join(MODES)}")
    if fd is None:
        report.error("POPCORN_FD is not set (or not a number): the positional form reports through that pipe")
        return popcorn.EXIT_NO_PIPE
    if args.testfile is None:
        raise UsageError(f"usage: eval.py {mode} TESTFILE")
    from harness.launch import sandbox_problem

    if sandbox_problem() is not None:  # before any work: this form never runs a submission unfenced
        raise UsageError(f"the popcorn protocol requires the OS sandbox: {sandbox_problem()}")
    problem = _load_problem(args)
    try:
        cases = popcorn.parse_testfile(args.testfile)
        for i, case in enumerate(cases):
            check_case({**problem.spec.case_defaults, **case}, f"{args.testfile}:{i + 1}",
                       problem.reference.generate_input)
    except (popcorn.BadTestFile, SpecError) as exc:
        report.error(str(exc))
        return popcorn.EXIT_BAD_TESTFILE
    submission = resolve_submissions(args.submission or ["submission.py"])[0]
    _fence_daemon(args, mode)
    device = detect(args.device)
    os.set_inheritable(fd, False)
    with os.fdopen(fd, "w", buffering=1) as out:
        passed = run_popcorn(args, problem, submission, device, mode, seed, tuple(cases), out)
    return popcorn.EXIT_OK if passed else popcorn.EXIT_CHECK_FAILED


def _vendor_profile(args: argparse.Namespace, problem, device, submissions: list[Path], small: bool) -> int:
    from harness import report
    from harness.launch import SandboxUnavailable
    from harness.vendor_profile import ProfilerMissing, run_vendor_profiler

    tool = "ncu" if args.ncu else "rocprof"
    if args.mode != "profile" or (args.ncu and args.rocprof) or len(submissions) != 1:
        raise UsageError(f"--{tool} goes with --mode profile and exactly one --submission")
    cases = problem.spec.cases("benchmark", small)
    if not 0 <= args.case < len(cases):
        raise UsageError(f"--case {args.case}: the task has benchmark cases 0..{len(cases) - 1}")
    try:
        report_path, summary = run_vendor_profiler(tool, device.vendor, Path(problem.spec.path), submissions[0],
                                                   args.case, Path(args.logs).parent / "profiles", args.sandbox,
                                                   private_paths(args))
    except (ProfilerMissing, SandboxUnavailable) as exc:
        raise UsageError(str(exc)) from None
    except RuntimeError as exc:
        report.error(str(exc))
        return 1
    from harness.channel import printable

    for line in summary.splitlines():  # (kernel names and, from rocprof, the profiled process's own output)
        report.console.print(printable(line), markup=False, highlight=False, emoji=False)
    report.err_console.print(f"{tool} report: {report.escape(str(report_path))}")
    return 0


def _selftest(problem, device, small: bool) -> int:
    from harness import report
    from harness.selftest import run_selftest

    report.err_console.print(f"selftest of check policy '{problem.check_policy}' on {device.describe()}")
    rows = run_selftest(problem, device, small,
                        progress=lambda case: report.err_console.print(f"  {case.kind} {problem.label(case.args)}"))
    report.console.print(report.selftest_table(rows, problem.label, problem.check_policy))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
