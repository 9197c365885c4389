"""The command line's flags (argparse), the run's configuration built from them once (`configuration`),
and where the task named by --task is found."""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path
from typing import Optional, Sequence

from harness.config import RunConfig, UsageError, timeouts_text
from harness.report.store import results_folder


REPO_ROOT = Path(__file__).resolve().parents[2]


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
                        "'mla-eval[gpu]'): joules per call per case, from a burst of calls back to back after the "
                        "timed ones (up to 3 s a case; no flush, refill or reference between them); a diagnostic "
                        "that never ranks")
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


def default_task() -> Path:
    """./task.yml, else the checkout's, else the copy a non-editable install put in share/."""
    for candidate in (Path("task.yml"), REPO_ROOT / "task.yml", Path(sys.prefix) / "share" / "mla-eval" / "task.yml"):
        if candidate.is_file():
            return candidate
    return REPO_ROOT / "task.yml"  # reported as missing by the loader


def local_tasks() -> list[Path]:
    """The tasks this harness has: the default task.yml, and the checkout's and the installed copy's, with
    their named tasks (tasks/NAME/task.yml)."""
    roots = (REPO_ROOT, Path(sys.prefix) / "share" / "mla-eval")
    found = [default_task(), *(r / "task.yml" for r in roots),
             *(t for r in roots for t in sorted(r.glob("tasks/*/task.yml")))]
    return list(dict.fromkeys(t.resolve() for t in found if t.is_file()))


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


def configuration(args: argparse.Namespace, argv: Sequence[str]) -> RunConfig:
    """The run's one configuration from the parsed command line `args` (`argv`: as typed, recorded in
    a --bundle): every flag's final value, with a --replay bundle's flags, files and seed over the
    command line's (harness/cli/bundle.py; BundleError where it cannot be read or a flag clashes), the
    database and the log folder defaulting to the results folder's (popcorn's form: ./results,
    kernelbot's own folder per submission), and a fresh random secret seed where none is given."""
    values, notes, rows, shas, names = dict(vars(args)), [], (), frozenset(), ()
    if args.replay:
        from harness.cli import bundle

        replayed = bundle.read(args.replay)
        overrides, notes = bundle.replay_args(replayed, args, bundle.workdir(), build_parser, local_tasks())
        values.update(overrides)
        rows, shas = tuple(replayed["results"]["rows"]), frozenset(s["sha256"] for s in replayed["submissions"])
        names = tuple((str(Path(path).resolve()), entry.get("name") or Path(entry["path"]).name)
                      for path, entry in zip(overrides["submission"], replayed["submissions"]))
    db, logs = values.pop("db"), values.pop("logs")
    if db is None or logs is None:
        folder = Path.cwd() / "results" if values["popcorn_mode"] is not None else results_folder()
        db, logs = db or str(folder / "mla-eval.db"), logs or str(folder / "logs")
    seed, task = values.pop("seed"), values.pop("task")
    flags = {dest: tuple(value) if isinstance(value, list) else value for dest, value in values.items()}
    return RunConfig(**flags, db=db, logs=logs, private=private_paths(db, logs), task=str(task_path(task).resolve()),
                     seed=secrets.randbits(63) if seed is None else seed, argv=tuple(argv),
                     replay_notes=tuple(notes), replayed=rows, replayed_sha256=shas, replayed_names=names)


def private_paths(db: str, logs: str) -> tuple[Path, ...]:
    """What no worker may see: the results database, its folder (other runs' databases there, which
    a submission could read, or read-lock so that their runs cannot write; harness/parent/launch.py
    leaves a folder visible where the worker needs what it holds) and the log folder."""
    return (Path(db), Path(db).resolve().parent, Path(logs))


def shared_paths(share: Optional[Sequence[str]], private: Sequence[Path]) -> tuple[Path, ...]:
    """--share: files or folders every worker may read besides its own submission (public code a
    submission loads by path), checked: each exists, and none is or holds the checkout, $HOME or a
    `private` path (UsageError)."""
    from harness.parent.allowlist import checkout

    shared = tuple(Path(p).resolve() for p in share or ())
    keep_out = [p for p in (checkout(), Path.home(), *(Path(p).resolve() for p in private)) if p]
    for path in shared:
        if not path.exists():
            raise UsageError(f"--share {path}: no such file or folder")
        if path == Path("/") or any(out.is_relative_to(path) for out in keep_out):
            raise UsageError(f"--share {path}: it holds the checkout, $HOME or the results; share the files a "
                             "submission loads, not their folder")
    return shared
