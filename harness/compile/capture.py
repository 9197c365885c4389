"""The sandboxed side of the cross-compile report, one entry point for its three kinds of process:

    python -m harness.compile.capture --child --submission FILE --task FILE [--target T ...]
    python -m harness.compile.capture --target-stage     (its input on stdin)
    python -m harness.compile.capture --compile-stage    (its input on stdin)

The child (run.py's `cross_compile_report` starts it) starts a target process per target with a
known GPU and reads their lines; for the other targets it captures the launches on the CPU under
Triton's interpreter itself and starts a compile process for them; then writes the report, one JSON
object, on its stdout. The sandbox holds only the harness modules this file imports, directly or
through each other: the child's side, none of the parent's."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from typing import Optional, Sequence

from harness.compile.compiler import _compile_all, _row, apply_overrides
from harness.compile.record import _capture
from harness.compile.targets import (DEFAULT_TARGETS, NO_DEVICE, PLANNED_ON_CPU, PLANNED_ON_TARGET, TARGET_DEVICES,
                                     install_device, target_device)

MODULE = "harness.compile.capture"   # this file, as the child and its processes are started: python -m MODULE


def _claim_stdout():
    """The process's real stdout, kept for the report; file descriptor 1 (and with it sys.stdout and
    every child) now writes to stderr, so nothing the submission prints can mix into the JSON."""
    sys.stdout.flush()
    real = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return real


@dataclasses.dataclass
class _Stage:
    """What a target or compile process reported (its JSON lines), and how it ended."""

    launches: Optional[list] = None      # the launches it compiles (a target process says them first)
    rows: list = dataclasses.field(default_factory=list)
    problem: Optional[str] = None
    fallback: Optional[str] = None       # why the target's launches must come from the CPU instead
    code: int = 0


def _run_stage(flag: str, payload: dict, env: dict) -> _Stage:
    """Start `python -m harness.compile.capture FLAG`, hand it `payload` on stdin, read its lines."""
    stage = _Stage()
    process = subprocess.Popen([sys.executable, "-m", MODULE, flag], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    process.stdin.write(json.dumps(payload))
    process.stdin.close()
    for line in process.stdout:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        if "kernel" in item and "target" in item:  # a row
            stage.rows.append(item)
            continue
        if isinstance(item.get("launches"), list):
            stage.launches = item["launches"]
        if isinstance(item.get("rows"), list):  # rows together (the form of the child's own report)
            stage.rows += [row for row in item["rows"] if isinstance(row, dict)]
        if isinstance(item.get("problem"), str):
            stage.problem = item["problem"]
        if isinstance(item.get("fallback"), str):
            stage.fallback = item["fallback"]
    stage.code = process.wait()
    return stage


def _finished(stage: _Stage, targets: Sequence[str], plan: str, on_target: bool) -> list[dict]:
    """A stage's rows for `targets`, each saying how its launches were planned, and a failed row for
    every (launch, target) a stage that ended in an error never reported; its problem in every note."""
    rows = list(stage.rows)
    done = {(row.get("index"), row.get("target")) for row in rows}
    lost = f"the compile process ended with code {stage.code} before finishing this kernel"
    for index, launch in enumerate(stage.launches or []):
        for target in targets:
            if (index, target) not in done and stage.code != 0:
                rows.append(_row(launch, target, status="failed", error=lost))
    for row in rows:
        row.update(plan=plan, on_target=on_target)
        if stage.problem and isinstance(row.get("notes"), list):
            row["notes"].append(stage.problem)
    return rows


def _child_main(args: argparse.Namespace) -> int:
    """The child: a target process per target with a known GPU; the launches of the others (and of
    any the file cannot be planned for as on its GPU) captured here on the CPU under the interpreter
    and compiled by a compile process. Writes {"rows": [...], "problem": ...} to its stdout; a target
    process ended before reporting anything (the submission exited) ends it with the same code."""
    from concurrent.futures import ThreadPoolExecutor

    report = _claim_stdout()
    targets = list(dict.fromkeys(args.target or DEFAULT_TARGETS))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    devices = {target: target_device(target) for target in targets}
    planned = [target for target in targets if devices[target] is not None]
    payload = {"submission": args.submission, "task": args.task, "cases": args.cases, "constexprs": args.set,
               "options": args.option}
    with ThreadPoolExecutor(max(1, min(len(planned), os.cpu_count() or 1))) as pool:
        stages = dict(zip(planned, pool.map(lambda t: _run_stage("--target-stage", {**payload, "target": t}, env),
                                            planned)))
    rows: list[dict] = []
    problems: list[str] = []
    on_cpu = {t: NO_DEVICE.format(target=t, known=", ".join(TARGET_DEVICES)) for t in targets if devices[t] is None}
    for target, stage in stages.items():
        if stage.fallback is not None:
            on_cpu[target] = stage.fallback
        elif stage.launches is None and not stage.rows and stage.code != 0:
            return stage.code if stage.code > 0 else 128 - stage.code  # (a signal: 128 + its number)
        else:
            rows += _finished(stage, [target], PLANNED_ON_TARGET.format(device=devices[target].describe()), True)
            problems += [stage.problem] if stage.problem else []
    if on_cpu:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels become interpreted functions
        launches, problem, _ = _capture(args.submission, args.task, args.cases)
        try:
            launches = apply_overrides(launches, args.set, args.option)
        except ValueError as exc:
            launches, problem = [], str(exc)
        stage = _Stage(launches=launches, problem=problem)
        if launches:
            stage = _run_stage("--compile-stage", {"submission": args.submission, "launches": launches,
                                                   "targets": list(on_cpu)}, env)
            stage.launches, stage.problem = launches, stage.problem or problem
        for target, why in on_cpu.items():
            device = devices[target]
            plan = PLANNED_ON_CPU.format(device=device.name if device else target, why=why)
            rows += _finished(dataclasses.replace(stage, rows=[r for r in stage.rows if r.get("target") == target]),
                              [target], plan, False)
        problems += [stage.problem] if stage.problem else []
    order = {target: i for i, target in enumerate(targets)}
    rows.sort(key=lambda row: (order.get(row.get("target"), len(order)), row.get("index") or 0))
    report.write(json.dumps({"rows": rows, "problem": None if rows else (problems[0] if problems else None)}))
    report.close()
    return 0


def _target_stage_main() -> int:
    """A target process: reads {submission, task, cases, constexprs, options, target} on stdin; with
    the target's GPU installed, captures the launches ({"launches": [...], "problem": ...} first, or
    {"fallback": why} when they cannot be planned as there) and compiles each for the target (a
    line per row, as each is done), on stdout."""
    payload = json.loads(sys.stdin.read())
    report = _claim_stdout()

    def emit(item: dict) -> None:
        report.write(json.dumps(item) + "\n")
        report.flush()

    device = target_device(payload["target"])
    install_device(device)
    launches, problem, fallback = _capture(payload["submission"], payload["task"], payload["cases"], device)
    if fallback is not None:
        emit({"fallback": fallback})
        return 0
    try:
        launches = apply_overrides(launches, payload["constexprs"], payload["options"])
    except ValueError as exc:
        launches, problem = [], str(exc)
    emit({"launches": launches, "problem": problem})
    _compile_all(sys.modules.get("submission"), launches, [payload["target"]], emit)
    return 0


def _compile_stage_main() -> int:
    """The compile process, for launches captured on the CPU: reads {submission, launches, targets}
    on stdin, imports the submission without the interpreter and writes each row on stdout as a
    line of JSON as it is done (_compile_all; lab/plan_compile.py reads them too)."""
    payload = json.loads(sys.stdin.read())
    report = _claim_stdout()

    def emit(item: dict) -> None:
        report.write(json.dumps(item) + "\n")
        report.flush()

    from harness.worker import compat
    from harness.worker.channel import one_line
    from harness.worker.loop import load_module

    compat.install()
    try:
        module = load_module(payload["submission"])
    except BaseException as exc:
        emit({"problem": f"importing the submission without the interpreter failed: {one_line(exc)}"})
        return 0
    _compile_all(module, payload["launches"], payload["targets"], emit)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    """The child (--child, its arguments as run.py's `cross_compile_report` passes them), or a process
    it starts: --target-stage, --compile-stage (each reads its input on stdin)."""
    argv = sys.argv[1:] if argv is None else argv
    if "--compile-stage" in argv:
        return _compile_stage_main()
    if "--target-stage" in argv:
        return _target_stage_main()
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}",
                                     description="The cross-compile report's sandboxed child (harness/compile/"
                                                 "run.py starts it).")
    parser.add_argument("--child", action="store_true", required=True)
    parser.add_argument("--submission", required=True)
    parser.add_argument("--task", required=True)
    parser.add_argument("--target", action="append")
    parser.add_argument("--cases", type=int, default=None)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE")
    return _child_main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
