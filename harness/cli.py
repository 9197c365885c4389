"""Command line: parse the flags, check them, dispatch to a mode (history, compile, selftest, a
vendor profiler, popcorn's positional form, or an engine run, whose lifecycle is harness/run.py's),
set the exit code.

Exit codes: 0 every requested submission passed; 1 some submission failed; 2 bad usage or input;
130 interrupted (Ctrl-C); 143 terminated (SIGTERM).
"""

from __future__ import annotations

# first: importing harness.run starts the run's wall clock (harness.run.STARTED)
from harness.run import cross_compile, parallel, private_paths, run, run_popcorn, shared_paths, write_html

import argparse  # noqa: E402
import glob  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Optional, Sequence  # noqa: E402

from harness.config import UsageError, timeouts_text  # noqa: E402
from harness.scan import SourceError, read_source  # noqa: E402
from harness.spec import MODES, SpecError  # noqa: E402
from harness.store import results_folder  # noqa: E402

# torch (harness.device, harness.engine, harness.report) is imported only after the first
# submission's worker has been started, so that both processes import it at the same time.

REPO_ROOT = Path(__file__).resolve().parent.parent


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not argparse's usage block
        self.exit(2, f"error: {message} (python eval.py --help lists the flags)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="eval.py", description="Evaluate MLA decode kernels: correctness, timing, a local leaderboard.")
    p.add_argument("popcorn_mode", nargs="?", metavar="MODE",
                   help="GPU MODE's positional form: `eval.py MODE TESTFILE` (popcorn protocol, needs POPCORN_FD)")
    p.add_argument("testfile", nargs="?", metavar="TESTFILE", help="cases as GPU MODE writes them: key: value; ...")
    p.add_argument("--mode", default="leaderboard",
                   help="test | benchmark | leaderboard | profile | selftest | history | compile (default: leaderboard)")
    p.add_argument("--target", action="append", default=[], metavar="ARCH",
                   help="with --mode compile: compile for ARCH (repeatable; gfx950, gfx942, sm_90, sm_100; "
                        "default gfx950 and gfx942)")
    p.add_argument("--submission", action="append", default=[], metavar="PATH",
                   help="a submission file, or a glob pattern such as 'submissions/triton_*.py' (repeatable); "
                        "default: every submissions/*.py. A file whose name starts with _ is left out of the "
                        "default and of a pattern (a helper module), unless the pattern's name starts with _ too")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="leave out the submissions that match GLOB: a file name ('triton_*.py') or a path "
                        "('submissions/torch_*.py') (repeatable)")
    p.add_argument("--device", choices=("cpu", "cuda"), help="override device detection")
    p.add_argument("--small", action="store_true", help="use the task's small (CPU) shapes even on a GPU")
    _add_task_and_store_flags(p)
    _add_case_and_output_flags(p)
    _add_timing_flags(p)
    return p


def _add_task_and_store_flags(p: argparse.ArgumentParser) -> None:
    """Which task and check; where results go and what is read back (--history, --compare)."""
    p.add_argument("--check", metavar="POLICY",
                   help="check policy from task.yml (strict: ours, the default; competition: the seed's)")
    p.add_argument("--task", default=None,
                   help="task file (reference.py beside it), or a task's name: competition (the competition's own "
                        "cases and check), rmsnorm (default: ./task.yml, else the repository's)")
    p.add_argument("--db", help="SQLite results database (default: mla-eval.db in the results folder: the results/ "
                               "of the checkout of this project that holds the working folder or this code, else "
                               "$XDG_DATA_HOME/mla-eval or ~/.local/share/mla-eval; here: "
                               f"{results_folder()})")
    p.add_argument("--logs", help="folder for each submission's stdout/stderr (default: logs/ in the results folder)")
    p.add_argument("--compare", nargs=2, type=int, metavar=("RUN_A", "RUN_B"),
                   help="with --mode history: per-case ratio of RUN_B's medians to RUN_A's")
    p.add_argument("--history", action="store_true",
                   help="with --mode leaderboard: the best stored leaderboard per submission version, for "
                        "this task and check, run nothing")


def _add_case_and_output_flags(p: argparse.ArgumentParser) -> None:
    """How cases run (budget, graph, seed, shapes, timeouts) and what is written (exports, plots, profiles)."""
    p.add_argument("--budget", type=float, metavar="SECONDS",
                   help="time budget per benchmark case (default: task.yml timing.max_seconds)")
    p.add_argument("--graph", action="store_true",
                   help="time CUDA-graph replays of each call (capturable submissions; plain calls otherwise)")
    p.add_argument("--seed", type=int, help="fix the run's secret seed (default: a fresh random one per run)")
    p.add_argument("--json", metavar="PATH", help="write every number shown to a JSON file")
    p.add_argument("--csv", metavar="PATH", help="write every number shown to a CSV file")
    p.add_argument("--markdown", metavar="PATH", help="write every number shown to a Markdown file")
    p.add_argument("--plot", metavar="DIR", help="write leaderboard.png and roofline.png to DIR (matplotlib)")
    p.add_argument("--html", metavar="PATH", help="write a self-contained HTML page of the run and its submissions' "
                   "history (with --mode history: of the newest timed run in the database)")
    p.add_argument("--ncu", action="store_true",
                   help="with --mode profile: one timed call of one case under Nsight Compute (NVIDIA)")
    p.add_argument("--rocprof", action="store_true",
                   help="with --mode profile: one timed call of one case under rocprof (AMD)")
    p.add_argument("--case", type=int, default=0, metavar="N", help="benchmark case for --ncu / --rocprof")
    p.add_argument("--shape", action="append", default=[], metavar="ARGS",
                   help="run this case instead of the task's (repeatable), as generate_input's arguments: "
                        "'batchsize=4,qseqlen=1,kvseqlen=1024' (seed optional; kvseqlens=[...] for a ragged batch)")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="cap every timeout of the task (worker start, each test case, each benchmark case); "
                        f"default: the task's own ({_default_timeouts()}); a run prints those in force")


def _add_timing_flags(p: argparse.ArgumentParser) -> None:
    """Where evaluators run, outside timing, baseline, energy, diagnostics, replay bundles, progress."""
    _add_evaluator_flags(p)
    p.add_argument("--no-audit", action="store_true",
                   help="on a GPU: no outside timing (the parent's fence, or the profiler's audit where it cannot "
                        "fence): the worker's own numbers, marked unverified")
    p.add_argument("--baseline", metavar="FILE",
                   help="benchmark or leaderboard mode: also evaluate FILE (if not already a --submission) and show "
                        "every submission's speedup over it")
    p.add_argument("--energy", action="store_true",
                   help="benchmark or leaderboard mode on a GPU with an energy counter (NVML: pip install "
                        "'mla-eval[gpu]'): joules per call per case, the calls alone (the harness's own work measured "
                        "apart and subtracted); each case's timed calls then last at least 10 of the counter's steps")
    p.add_argument("--diagnostics", action="store_true",
                   help="benchmark or leaderboard mode on a GPU: also time a few calls per case the competition's "
                        "way (its 62.5 GiB random fill, CUDA events, the mean: comp µs) and as isolated calls (wall "
                        "time of the call and a synchronize, less the ranked median: host overhead µs); the worker's "
                        "own numbers, shown beside the ranked one, never instead of it")
    p.add_argument("--bundle", metavar="PATH",
                   help="write a replay bundle: one JSON file with the submissions, the task's files, the seed and "
                        "flags, the versions and GPU, and the results (--replay PATH runs it again)")
    p.add_argument("--replay", metavar="PATH",
                   help="run a --bundle file's evaluation again (its files, seed and flags; refused if a file at a "
                        "path it recorded differs from its copy) and say per case whether the median is the same "
                        "(95%% intervals overlap), faster or slower")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def _default_timeouts() -> str:
    """The default task's timeouts, as --help shows them."""
    import yaml

    task = default_task()
    try:
        return f"{task}: {timeouts_text(yaml.safe_load(task.read_text())['timeouts'])}"
    except Exception:  # noqa: BLE001 - a task the run itself will report on
        return "task.yml `timeouts`"


def _add_evaluator_flags(p: argparse.ArgumentParser) -> None:
    """Where the evaluators run: in parallel (--gpus, --workers, Ray), and in which sandbox."""
    p.add_argument("--gpus", metavar="all|N",
                   help="evaluate submissions in parallel, one evaluator per GPU (0: CPU workers)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="parallel evaluators (default: one per GPU); more than one per GPU only for --mode test")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local processes (default) or a Ray cluster (pip install '.[ray]')")
    p.add_argument("--address", metavar="ADDR", help="with --backend ray: the cluster (default: start a local Ray)")
    p.add_argument("--sandbox", choices=("auto", "require", "off"), default="auto",
                   help="the OS sandbox around each worker (bubblewrap): auto (default: used where it works, "
                        "else a loud warning and results marked unsandboxed), require (refuse without it), off")
    p.add_argument("--share", action="append", metavar="PATH",
                   help="a file or folder every worker may read besides its own submission (read-only; repeatable): "
                        "public code a submission loads by path. Nothing else of the checkout is visible to a worker")


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


def default_task() -> Path:
    """./task.yml, else the checkout's, else the copy a non-editable install put in share/."""
    for candidate in (Path("task.yml"), REPO_ROOT / "task.yml", Path(sys.prefix) / "share" / "mla-eval" / "task.yml"):
        if candidate.is_file():
            return candidate
    return REPO_ROOT / "task.yml"  # reported as missing by the loader


def task_path(task: Optional[str]) -> Path:
    """--task: a task file, or the name of one of the checkout's tasks (tasks/NAME/task.yml)."""
    if task is None:
        return default_task()
    if not Path(task).exists() and "/" not in task:  # a name: the checkout's tasks, else the installed copy's
        for root in (REPO_ROOT, Path(sys.prefix) / "share" / "mla-eval"):
            named = root / "tasks" / task / "task.yml"
            if named.is_file():
                return named
    return Path(task)


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


GLOB_CHARACTERS = "*?["


def resolve_submissions(paths: Sequence[str], exclude: Sequence[str] = ()) -> list[Path]:
    """The files to evaluate, checked: each exists and is a .py file whose path can be shown and
    stored as it is. `paths`: files, or glob patterns (a path that exists is a file, whatever its
    characters); default submissions/*.py. A file whose name starts with _ (a helper module) is left
    out of the default and of a pattern whose own file name does not start with _. `exclude`: glob
    patterns of the files to leave out (`_excluded`); one that matches none is an error."""
    if not paths:
        folder = Path("submissions") if Path("submissions").is_dir() else REPO_ROOT / "submissions"
        found = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
        if not found:
            raise UsageError(f"{folder}: no submissions (*.py) found; pass --submission PATH")
        return _without([_checked_file(str(p), Path(_showable(p))) for p in found], exclude)
    out: list[Path] = []
    for raw in paths:
        if not Path(raw).exists() and any(c in raw for c in GLOB_CHARACTERS):
            found = [Path(p) for p in sorted(glob.glob(raw, recursive=True)) if p.endswith(".py")]
            found = [p for p in found if not p.name.startswith("_") or Path(raw).name.startswith("_")]
            if not found:
                raise UsageError(f"--submission {raw}: no .py file matches this pattern")
            checked = [_checked_file(str(p), Path(_showable(p))) for p in found]
            out += [p for p in checked if p not in out]  # (two patterns may match one file)
            continue
        path = Path(_showable(Path(raw)))
        if not path.exists():
            raise UsageError(f"{raw}: submission file not found")
        out.append(_checked_file(raw, path))
    return _without(out, exclude)


def _without(files: list[Path], patterns: Sequence[str]) -> list[Path]:
    """`files` less those an --exclude pattern matches; a pattern that matches none, or leaving no
    file, is an error."""
    for pattern in patterns:
        matched = [p for p in files if _excluded(p, pattern)]
        if not matched:
            raise UsageError(f"--exclude {pattern}: matches none of the {len(files)} submission(s)")
        files = [p for p in files if p not in matched]
    if not files:
        raise UsageError(f"--exclude {' '.join(patterns)}: leaves no submission to evaluate")
    return files


def _excluded(path: Path, pattern: str) -> bool:
    """Whether glob `pattern` matches the submission at `path` (absolute): a relative pattern
    against its last parts (its file name, or submissions/NAME) or as a path from the working
    folder (../other/*.py); an absolute one against the whole path."""
    try:
        return path.match(pattern) or path.match(os.path.abspath(pattern))
    except ValueError:  # ('', '.')
        raise UsageError(f"--exclude {pattern!r}: not a file pattern") from None


def _checked_file(raw: str, path: Path) -> Path:
    """`path` resolved, if it is a submission the parent will read: a .py regular file of at most
    scan.MAX_SOURCE_BYTES (harness/scan.py, read_source), not a link (the sandbox hides the other
    files of a submission's own folder, and a link's file lives in another one)."""
    if path.is_symlink():
        raise UsageError(f"{raw}: is a symbolic link; pass the file it points to")
    if path.is_dir():
        raise UsageError(f"{raw}: is a folder; pass a .py file")
    if path.suffix != ".py":
        raise UsageError(f"{raw}: not a Python file (expected a .py submission)")
    try:
        read_source(path)
    except SourceError as e:
        raise UsageError(f"{raw}: {e}") from None
    return _showable(path.resolve())


MARKUP_CHARACTERS = "[]$"


def _showable(path: Path) -> Path:
    """`path`, if every character of it can be printed, stored and exported as it is: a file name
    is the submitter's choice, and one with terminal escapes, line breaks or bytes that are not
    UTF-8 would reach the report, the database and the exports."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{ascii(text)}: path not valid UTF-8; rename the file") from None
    if not text.isprintable():
        raise UsageError(f"{ascii(text)}: path holds control characters; rename the file") from None
    markup = sorted(set(text) & set(MARKUP_CHARACTERS))
    if markup:  # rich's markup ([link=...], [/x]) in the terminal, matplotlib's mathtext ($...$) in the plots
        raise UsageError(f"{text}: path holds {' '.join(markup)}, which the reports would read as markup; "
                         "rename the file or its folder")
    return path


if __name__ == "__main__":
    sys.exit(main())
