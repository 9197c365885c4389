"""Start a submission's worker process, with the standard library only.

`Sandbox` uses this for every worker. The CLI also calls it before it imports torch, for the
first submission of a run: the worker then imports torch, initialises the GPU and imports the
submission while the parent does the same for itself, so their startups overlap.
"""

from __future__ import annotations

import multiprocessing
import signal
from pathlib import Path
from typing import Any, Optional

from harness import worker

REPO_ROOT = str(Path(__file__).resolve().parent.parent)


def log_path(log_dir: Path, submission: Path) -> Path:
    """Where a submission's worker writes its stdout and stderr."""
    return Path(log_dir) / f"{submission.stem}.log"


def start_worker(submission: Path, device_type: Optional[str], log_path: Path, l2_bytes: int = 0) -> tuple[Any, Any]:
    """Spawn `harness.worker.main` for `submission`; return (process, the parent's end of the pipe).
    device_type None lets the worker pick the GPU if it has one (as `--device` unset does); l2_bytes
    0 lets it read the L2 size itself."""
    ctx = multiprocessing.get_context("spawn")
    conn, child_conn = ctx.Pipe(duplex=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("")
    proc = ctx.Process(target=worker.main, daemon=True, name=f"worker:{submission.name}",
                       args=(child_conn, str(submission), REPO_ROOT, str(log_path), device_type or "auto", l2_bytes))
    proc.start()
    child_conn.close()
    return proc, conn


def stop(proc: Any, conn: Any, goodbye: Any, grace: float) -> None:
    """Ask a child to exit (`goodbye` on its pipe), give it `grace` seconds, then kill it."""
    if proc.is_alive():
        try:
            conn.send(goodbye)
        except (OSError, ValueError):
            pass
        proc.join(timeout=grace)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=5)
    conn.close()


def how_it_ended(proc: Any) -> tuple[str, Optional[str]]:
    """(what happened to a child that is gone, its signal's name or None): "killed by SIGKILL",
    "exited with code 1", ..."""
    proc.join(timeout=5)
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}", name
    return f"exited with code {code}", None
