"""Start a submission's worker process, with the standard library only.

`Sandbox` uses this for every worker. The CLI also calls it before it imports torch, for the
first submission of a run: the worker then imports torch, initialises the GPU and imports the
submission while the parent does the same for itself, so their startups overlap.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any, Optional

from harness import worker

REPO_ROOT = str(Path(__file__).resolve().parent.parent)


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
