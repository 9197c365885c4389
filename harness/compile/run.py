"""The parent's side of the cross-compile report: `cross_compile_report` starts the sandboxed child
(capture.py, `python -m harness.compile.capture --child`) and reads its JSON report strictly
(report.py's `read_report`); it never imports the submission. `main` is the command line:

    python -m harness.compile --submission FILE [--target gfx950 --target gfx942] [--task task.yml]

Output: per target, how its launches were planned and the settings each kernel shares, then a table
laid out for the terminal's width (`CompileReport`; `--markdown FILE` writes the rows as Markdown,
`--json FILE` the rows themselves). Exit code 0 when every kernel compiled for every target, 1
otherwise, 2 for bad usage."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from harness.worker.channel import printable_line
from harness.compile.report import TEXT_LIMIT, CrossCompileError, read_report, report_markdown, show_report
from harness.compile.targets import DEFAULT_TARGETS, parse_target

REPORT_LIMIT = 4 << 20      # bytes of the child's JSON report the parent reads
DEFAULT_TIMEOUT = 900       # seconds for capture and every compile together
CHILD = "harness.compile.capture"                      # the child: python -m CHILD --child ...
CHILD_FILE = Path(__file__).with_name("capture.py")    # its entry file (the sandbox holds what it imports)


def cross_compile_report(submission: Path, targets: list[str], task: Path, sandbox: str = "auto", *,
                         cases: Optional[int] = None, constexprs: Sequence[str] = (), options: Sequence[str] = (),
                         private: Sequence[Path] = (), timeout: float = DEFAULT_TIMEOUT) -> list[dict]:
    """One row per (captured kernel specialization, target): see report.py's ROW_FIELDS and
    `CompileReport`; each row also says whether the submission ran "sandboxed". `cases`: only the
    first N small test cases. `constexprs` / `options`: "NAME=VALUE" overrides applied to every
    captured launch before compiling. `private`: paths the sandbox hides (the results database, the
    logs). Raises CrossCompileError (one line) when no report can be made, SandboxUnavailable for
    sandbox="require" where there is no sandbox, ValueError for a bad target or override."""
    from harness.parent.launch import bwrap_command, child_env, child_view, find_bwrap, use_sandbox, worker_folder

    submission, task = Path(submission).resolve(), Path(task).resolve()
    for name in targets:
        parse_target(name)
    for text in (*constexprs, *options):
        if not re.fullmatch(r"[A-Za-z_]\w*=.+", text):
            raise ValueError(f"{text!r}: an override is NAME=VALUE")
    for path, what in ((submission, "submission"), (task, "task file")):
        if not path.is_file():
            raise CrossCompileError(f"{path}: {what} not found")
    sandboxed = use_sandbox(sandbox)
    child = [sys.executable, "-m", CHILD, "--child", "--submission", str(submission),
             "--task", str(task), *(f"--target={t}" for t in targets), *(f"--set={c}" for c in constexprs),
             *(f"--option={o}" for o in options), *(["--cases", str(cases)] if cases else [])]
    env = child_env()
    env.pop("TRITON_INTERPRET", None)
    with worker_folder("mla-eval-xc-") as scratch, worker_folder("mla-eval-xc-out-") as outside:
        box = None
        if sandboxed:  # (its working folder is then a tmpfs of the sandbox's own)
            box = bwrap_command(find_bwrap(), submission, private, **child_view(CHILD_FILE, task))
            command = box + child
        else:
            (Path(scratch) / "triton-cache").mkdir()
            command = child
            env.update(HOME=scratch, TRITON_CACHE_DIR=str(Path(scratch) / "triton-cache"))
        code, raw, err_tail = _run(command, env, Path(scratch), Path(outside), timeout, box)
    if code != 0 and not raw.strip():
        last = [line for line in err_tail.splitlines() if line.strip()][-1:] or ["no output"]
        raise CrossCompileError(f"the cross-compile process exited with code {code}: {printable_line(last[0])[:TEXT_LIMIT]}")
    rows, problem = read_report(raw)
    if problem and not rows:
        raise CrossCompileError(problem)
    for row in rows:
        row["sandboxed"] = sandboxed
        if problem:
            row["notes"].append(problem)
    return rows


def _run(command: list[str], env: dict, scratch: Path, outside: Path, timeout: float, box=None) -> tuple[int, bytes, str]:
    """Run the capture process (harness/parent/launch.py, run_captured: its output through pipes into files
    of `outside`; `box`, the sandbox the command starts with); (exit code, its report: at most
    REPORT_LIMIT bytes of stdout, the end of stderr)."""
    from harness.parent.launch import run_captured

    try:
        code, raw, overflowed, err_tail = run_captured(command, env, scratch, outside, timeout, REPORT_LIMIT, box=box)
    except subprocess.TimeoutExpired:
        raise CrossCompileError(f"the cross-compile run took over {timeout:.0f} s and was stopped") from None
    if overflowed:
        raise CrossCompileError(f"the report is larger than {REPORT_LIMIT} bytes")
    return code, raw, err_tail


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.compile",
                                     description="Which Triton kernels a submission launches compile for AMD / "
                                                 "NVIDIA targets, and their registers, spills, LDS and occupancy.")
    parser.add_argument("--submission", required=True)
    parser.add_argument("--target", action="append", help="gfx950, gfx942, sm_90, sm_100 (repeatable; "
                                                          "default gfx950 and gfx942)")
    parser.add_argument("--task", default=str(Path(__file__).resolve().parents[2] / "task.yml"))
    parser.add_argument("--cases", type=int, default=None, help="run only the first N small test cases")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="compile with this constexpr value instead of the captured one (e.g. DOT_DTYPE=bf16)")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="add this launch option to every launch (e.g. matrix_instr_nonkdim=16)")
    parser.add_argument("--sandbox", choices=("auto", "require", "off"), default="auto")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    parser.add_argument("--json", help="write the report's rows to this file")
    parser.add_argument("--markdown", help="write the table to this file as Markdown")
    args = parser.parse_args(argv)

    from rich.console import Console

    from harness.parent.launch import SandboxUnavailable

    targets = args.target or list(DEFAULT_TARGETS)
    try:
        rows = cross_compile_report(Path(args.submission), targets, Path(args.task), args.sandbox, cases=args.cases,
                                    constexprs=args.set, options=args.option, timeout=args.timeout)
    except (ValueError, SandboxUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except CrossCompileError as exc:
        print(f"{Path(args.submission).name}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(report_markdown(rows))
    console = Console(highlight=False, emoji=False, width=None if Console().is_terminal else 200)
    overrides = ", ".join([*args.set, *args.option])
    return 0 if show_report(console, rows, Path(args.submission).name, targets,
                            f" with {overrides}" if overrides else "") else 1
