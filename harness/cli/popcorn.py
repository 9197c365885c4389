"""GPU MODE's popcorn protocol, so kernelbot and popcorn-cli can drive this harness unchanged.

kernelbot runs `python eval.py <mode> <TESTFILE>` with `POPCORN_FD` naming a pipe it reads:
one `key: value` line per result (`test-count`, `test.N.spec`, `test.N.status`, `benchmark.N.mean`
in nanoseconds, `check: pass|fail`, ...). TESTFILE holds one case per line as
`key: value; key: value`. `POPCORN_SEED`, when set, is a secret mixed into every case seed.
Exit codes follow GPU MODE's eval.py: 0 done, 112 a check failed, 113 a bad TESTFILE, 111 no pipe.

The pipe and the seed exist only in this (trusted) process: both variables are removed from the
environment before any worker starts, and workers inherit no file descriptors but their own.
"""

from __future__ import annotations

import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Optional, TextIO

from harness.worker.channel import printable_line
from harness.results import CaseResult, SubmissionResult

EXIT_OK, EXIT_NO_PIPE, EXIT_CHECK_FAILED, EXIT_BAD_TESTFILE = 0, 111, 112, 113
_KEY = re.compile(r"[a-zA-Z_]\w*")
_INT = re.compile(r"-?\d+")


class BadTestFile(ValueError):
    pass


def parse_value(text: str) -> Any:
    """An integer, true/false, a comma-separated list of integers (our extension, for ragged
    `kvseqlens`), or a bare word."""
    if _INT.fullmatch(text):
        return int(text)
    if text in ("true", "false"):
        return text == "true"
    if "," in text and all(_INT.fullmatch(p.strip()) for p in text.split(",")):
        return [int(p) for p in text.split(",")]
    if _KEY.fullmatch(text):
        return text
    raise ValueError(text)


TESTFILE_MAX_BYTES = 1 << 20  # GPU MODE's test files are a few lines


def parse_testfile(path: str | Path) -> list[dict[str, Any]]:
    from harness.parent.scan import SourceError, read_source

    try:
        lines = read_source(Path(path), TESTFILE_MAX_BYTES, "a test file").decode().splitlines()
    except SourceError as exc:
        raise BadTestFile(f"{path}: the test file {exc}") from None
    except UnicodeDecodeError:
        raise BadTestFile(f"{path}: the test file is not UTF-8 text") from None
    cases = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        case = {}
        for part in line.split(";"):
            if not part.strip():
                continue
            key, sep, raw = part.partition(":")
            key, raw = key.strip(), raw.strip()
            if not sep or not _KEY.fullmatch(key):
                raise BadTestFile(f"{path}:{number}: expected 'key: value; key: value', got {part.strip()!r}")
            try:
                case[key] = parse_value(raw)
            except ValueError:
                raise BadTestFile(f"{path}:{number}: bad value for {key}: {raw!r}") from None
        cases.append(case)
    if not cases:
        raise BadTestFile(f"{path}: no cases")
    return cases


_HANDOVER = "MLA_EVAL_HANDOVER_FD"


def hide_secrets_and_reexec(argv: list[str]) -> None:
    """Start this process again without POPCORN_FD / POPCORN_SEED in its environment.

    Removing them from os.environ is not enough: /proc/<pid>/environ keeps showing the
    environment the process was started with, and a worker can read its parent's. So the values
    go through a pipe to a fresh exec of this same command line, whose environment never held
    them. Returns only when there is nothing to hide (or after the hand-over, in the new process).
    """
    if _HANDOVER in os.environ or not ({"POPCORN_FD", "POPCORN_SEED"} & set(os.environ)):
        return
    values = {k: os.environ.pop(k) for k in ("POPCORN_FD", "POPCORN_SEED") if k in os.environ}
    read_end, write_end = os.pipe()
    os.write(write_end, "\n".join(f"{k}={v}" for k, v in values.items()).encode())
    os.close(write_end)
    os.set_inheritable(read_end, True)
    os.environ[_HANDOVER] = str(read_end)
    os.execv(sys.executable, [sys.executable, *argv])


def take_secrets() -> tuple[Optional[int], Optional[int]]:
    """POPCORN_FD and POPCORN_SEED, from the hand-over pipe (or the environment), removed from
    this process's environment so no worker can see them."""
    values = {k: os.environ.pop(k) for k in ("POPCORN_FD", "POPCORN_SEED") if k in os.environ}
    handover = os.environ.pop(_HANDOVER, None)
    if handover is not None:
        with os.fdopen(int(handover)) as pipe:
            values.update(line.split("=", 1) for line in pipe.read().splitlines() if "=" in line)
    try:
        fd = int(values["POPCORN_FD"]) if values.get("POPCORN_FD") else None
        seed = int(values["POPCORN_SEED"]) if values.get("POPCORN_SEED") else None
    except ValueError:
        return None, None
    return fd, seed


def spec_line(args: dict[str, Any]) -> str:
    return "; ".join(f"{k}: {','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in args.items())


def write_result(out: TextIO, mode: str, result: SubmissionResult) -> bool:
    """Write GPU MODE's lines for one submission's result; return whether every case passed."""
    def line(key: str, value: Any) -> None:  # one printable line each, whatever a reason holds
        out.write(f"{key}: {printable_line(str(value))}\n")

    tests = [c for c in result.cases if c.kind == "test"]
    benches = [c for c in result.cases if c.kind == "benchmark"]
    if mode == "test" or (mode == "leaderboard" and not benches):
        line("test-count", len(tests) if tests else "0")
        for i, c in enumerate(tests):
            line(f"test.{i}.spec", spec_line(c.args))
            line(f"test.{i}.status", "pass" if c.ok else "fail")
            line(f"test.{i}.{'message' if c.ok else 'error'}", c.reason)
    if mode in ("benchmark", "leaderboard"):
        line("benchmark-count", len(benches))
        line("timing", result.audit)  # "verified: ..." (the parent's fence) or "unverified: ..."
        line("timing-verified", "yes" if result.verified else "no")
        for i, c in enumerate(benches):
            line(f"benchmark.{i}.spec", spec_line(c.args))
            if not c.ok or c.device is None:
                line(f"benchmark.{i}.status", "fail")
                line(f"benchmark.{i}.error", c.reason)
                continue
            _benchmark_lines(line, i, c)
    if result.error:
        line("error", result.error)
    passed = result.ok
    line("check", "pass" if passed else "fail")
    out.flush()
    return passed


def _benchmark_lines(line, i: int, c: CaseResult) -> None:
    d = c.device
    line(f"benchmark.{i}.runs", d.runs)
    line(f"benchmark.{i}.mean", d.mean * 1e9)
    line(f"benchmark.{i}.std", d.std * 1e9)
    line(f"benchmark.{i}.err", d.std / math.sqrt(d.runs) * 1e9)
    line(f"benchmark.{i}.best", d.min * 1e9)
    line(f"benchmark.{i}.worst", d.max * 1e9)
    line(f"benchmark.{i}.median", d.median * 1e9)
