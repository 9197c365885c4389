"""--mode compile as a stored run: each submission's kernels compiled offline for each --target
(harness/crosscompile.py), shown, stored, and exported."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from harness.config import UsageError
from harness.flags import private_paths
from harness.run import _run_row


def cross_compile(args: argparse.Namespace, store, problem, submissions: list[Path]) -> int:
    """--mode compile: every Triton kernel each submission would launch on the task's small cases on
    each --target's GPU (planned in the sandbox as on that GPU, FakeTensor inputs, launches recorded
    not run; Triton's interpreter where that cannot work), compiled offline for the target:
    registers, spills, LDS, occupancy, matrix instructions, named traps (harness/crosscompile.py).
    Stored as a run."""
    import json

    from harness import report
    from harness.crosscompile import DEFAULT_TARGETS, parse_target
    from harness.device import detect, versions
    from harness.launch import use_sandbox

    if args.shape:
        raise UsageError("--shape does not go with --mode compile (it captures the task's small test cases)")
    targets = args.target or list(DEFAULT_TARGETS)
    for target in targets:
        try:
            parse_target(target)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.json and not Path(args.json).parent.is_dir():
        raise UsageError(f"--json {args.json}: the folder {Path(args.json).parent} does not exist")
    from harness.store import StoreError

    def finish(run_id: int) -> None:
        store.finish_run(run_id)
        report.err_console.print(f"results stored in {args.db} (run {run_id})")

    start = functools.partial(store.start_run, "compile", problem.spec.name, detect("cpu"), versions(), "-",
                              sandboxed=use_sandbox(args.sandbox))
    everything, ok, unstored = {}, True, []
    with _run_row(store, start, finish, unstored) as run_id:
        for path in submissions:
            rows, compiled = _compile_one(args, problem, path, targets)
            everything[str(path)], ok = rows, ok and compiled
            try:
                store.add_compile_report(run_id, str(path), targets, rows, compiled)
            except StoreError as exc:
                unstored.append(path.name)
                report.error(f"{path.name}: report not stored: {exc}")
    if args.json:
        Path(args.json).write_text(json.dumps({"targets": targets, "task": problem.spec.name, "submissions": everything},
                                              indent=2, default=str))
    if unstored:
        report.error(f"the results database failed: not stored: {', '.join(unstored)[:600]}; the reports above and "
                     "in any --json export are complete")
    return 0 if ok and not unstored else 1


def _compile_one(args: argparse.Namespace, problem, path: Path, targets: list[str]) -> tuple[dict, bool]:
    """One submission's cross-compile report, shown: (its rows, or {"error": why}; whether it compiled)."""
    from harness import report
    from harness.crosscompile import DEFAULT_TIMEOUT, CrossCompileError, cross_compile_report, show_report

    try:
        rows = cross_compile_report(path, targets, Path(problem.spec.path), sandbox=args.sandbox,
                                    private=private_paths(args), timeout=args.timeout or DEFAULT_TIMEOUT)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except CrossCompileError as exc:
        report.error(f"{path.name}: {exc}")
        return {"error": str(exc)}, False
    try:
        return rows, show_report(report.console, rows, path.name, targets)
    except Exception as exc:  # noqa: BLE001 - the child's report is untrusted; one file's, not the run's
        report.error(f"{path.name}: the report could not be shown ({type(exc).__name__}: {str(exc)[:120]})")
        return {"error": f"report not shown ({type(exc).__name__})"}, False
