"""--mode compile as a stored run: each submission's kernels compiled offline for each --target
(harness/compile/), shown, stored, and exported."""

from __future__ import annotations

import functools
from pathlib import Path

from harness.config import RunConfig, UsageError
from harness.cli.run import _run_row


def cross_compile(config: RunConfig, store, problem, submissions: list[Path]) -> int:
    """--mode compile: every Triton kernel each submission would launch on the task's small cases on
    each --target's GPU (planned in the sandbox as on that GPU, FakeTensor inputs, launches recorded
    not run; Triton's interpreter where that cannot work), compiled offline for the target:
    registers, spills, LDS, occupancy, matrix instructions, named traps (harness/compile/).
    Stored as a run."""
    import json

    from harness import report
    from harness.compile.targets import DEFAULT_TARGETS, parse_target
    from harness.device import detect, versions
    from harness.parent.launch import use_sandbox

    if config.shape:
        raise UsageError("--shape does not go with --mode compile (it captures the task's small test cases)")
    targets = list(config.target or DEFAULT_TARGETS)
    for target in targets:
        try:
            parse_target(target)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if config.json and not Path(config.json).parent.is_dir():
        raise UsageError(f"--json {config.json}: the folder {Path(config.json).parent} does not exist")
    from harness.report.store import StoreError

    def finish(run_id: int) -> None:
        store.finish_run(run_id)
        report.err_console.print(f"results stored in {config.db} (run {run_id})")

    start = functools.partial(store.start_run, "compile", problem.spec.name, detect("cpu"), versions(), "-",
                              sandboxed=use_sandbox(config.sandbox))
    everything, ok, unstored = {}, True, []
    with _run_row(store, start, finish, unstored) as run_id:
        for path in submissions:
            rows, compiled = _compile_one(config, problem, path, targets)
            everything[str(path)], ok = rows, ok and compiled
            try:
                store.add_compile_report(run_id, str(path), targets, rows, compiled)
            except StoreError as exc:
                unstored.append(path.name)
                report.error(f"{path.name}: report not stored: {exc}")
    if config.json:
        Path(config.json).write_text(json.dumps({"targets": targets, "task": problem.spec.name,
                                                 "submissions": everything}, indent=2, default=str))
    if unstored:
        report.error(f"the results database failed: not stored: {', '.join(unstored)[:600]}; the reports above and "
                     "in any --json export are complete")
    return 0 if ok and not unstored else 1


def _compile_one(config: RunConfig, problem, path: Path, targets: list[str]) -> tuple[dict, bool]:
    """One submission's cross-compile report, shown: (its rows, or {"error": why}; whether it compiled)."""
    from harness import report
    from harness.compile.report import CrossCompileError, show_report
    from harness.compile.run import DEFAULT_TIMEOUT, cross_compile_report

    try:
        rows = cross_compile_report(path, targets, Path(problem.spec.path), sandbox=config.sandbox,
                                    private=config.private, timeout=config.timeout or DEFAULT_TIMEOUT)
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
