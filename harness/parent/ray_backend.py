"""A cluster through Ray: one Ray task per submission, each asking for one GPU.

Ray schedules, places and pins (it sets CUDA_VISIBLE_DEVICES for a task that asks for a GPU);
we do not schedule anything ourselves. A task is trusted harness code: it runs `engine.evaluate`,
which starts the submission's untrusted worker as a child process on that node, and returns the
`SubmissionResult`. The driver (the CLI) collects the results and alone writes the database.

Timed GPU calls are fenced on the node as on one machine (harness/parent/fence.py): the task starts an MPS
daemon of its own for its GPU (or adopts one its environment names) before it makes a CUDA context,
so each task runs in a fresh Ray worker process (`max_calls=1`: a process that made a CUDA context
for an earlier task is no MPS client) and quits its daemon when it ends.

Nodes need not share a filesystem: the harness package travels as a Ray `py_modules` entry, and
each task gets the submission, task.yml and reference.py as bytes and writes them to a private
temporary folder. Ray is an optional extra: `pip install ".[ray]"`.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from harness.config import RunConfig
from harness.parent.pool import failed
from harness.worker.channel import one_line
from harness.parent.launch import log_path
from harness.parent.scan import SourceError, read_source

HARNESS_DIR = Path(__file__).resolve().parents[1]


class RayMissing(RuntimeError):
    pass


def _job(config: RunConfig, files: dict[str, bytes], name: str) -> Any:
    """Runs on a Ray worker: unpack the files, evaluate one submission, return its result."""
    from harness.parent import mps
    from harness.parent.engine import evaluate
    from harness.parent.context import run_context

    try:
        with tempfile.TemporaryDirectory(prefix="mla-eval-") as tmp:
            folder = Path(tmp)
            for rel, content in files.items():
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_bytes(content)
            local = dataclasses.replace(config, task=str(folder / "task" / files_task(files)),
                                        logs=str(folder / "logs"))
            result = evaluate(folder / "submission" / name, run_context(local), config.mode)
            log = Path(result.log)
            result.log = log.read_text(errors="replace")[-4000:] if log.exists() else ""  # the folder goes away
            return result
    finally:
        mps.stop()  # the daemon this task started for its GPU, if any


TASK_MARK = "task/.task"  # which file of the bundle is the task (a path relative to task/)


def task_bundle(task: Path) -> dict[str, bytes]:
    """The task's files for a Ray worker, under task/ in their own relative layout: the task file, the
    reference.py it names, its companion task (harness/parent/engine.py) and that one's reference."""
    from harness.task.spec import load_task

    files: list[Path] = []
    pending = [task.resolve()]
    while pending:
        path = pending.pop()
        if path in files:
            continue
        spec = load_task(path)
        files += [path, (path.parent / spec.reference).resolve()]
        if spec.companion:
            pending.append((path.parent / spec.companion).resolve())
    root = Path(os.path.commonpath([str(f.parent) for f in files]))
    bundle = {f"task/{f.relative_to(root)}": f.read_bytes() for f in files}
    bundle[TASK_MARK] = str(task.resolve().relative_to(root)).encode()
    return bundle


def files_task(files: dict[str, bytes]) -> str:
    return files[TASK_MARK].decode()


def evaluate_ray(paths: Sequence[Path], config: RunConfig, address: Optional[str],
                 on_result: Callable[[int, Any], None] = lambda i, r: None,
                 num_cpus: Optional[int] = None) -> list:
    """Evaluate `paths` as Ray tasks on the cluster at `address` (None: start a local Ray)."""
    try:
        import ray
    except ImportError:
        raise RayMissing("--backend ray needs Ray: pip install \".[ray]\"") from None

    task_files = task_bundle(Path(config.task))
    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(address=address, num_cpus=num_cpus if address is None else None, include_dashboard=False,
                     log_to_driver=False, runtime_env={"py_modules": [str(HARNESS_DIR)]})
        except Exception as exc:  # no cluster there, version mismatch, ...
            raise RayMissing(f"--backend ray: cannot start or reach Ray at {address or 'a local instance'}: "
                             f"{one_line(exc)}") from None
    gpu = config.device != "cpu"
    remote = ray.remote(num_gpus=1 if gpu else 0, num_cpus=1, max_retries=0, max_calls=1 if gpu else 0)(_job)
    refs = {}
    results: list = [None] * len(paths)
    for index, path in enumerate(paths):
        try:
            source = read_source(path)
        except SourceError as exc:  # (checked before the run: the file as it is now)
            results[index] = failed(path, f"submission file {exc}")
            on_result(index, results[index])
            continue
        refs[remote.remote(config, {**task_files, f"submission/{path.name}": source}, path.name)] = (index, path)
    try:
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            index, path = refs.pop(done[0])
            try:
                result = ray.get(done[0])
                result.path = str(path)
                local_log = log_path(Path(config.logs), path)  # the node's log, kept here
                local_log.parent.mkdir(parents=True, exist_ok=True)
                local_log.write_text(result.log)
                result.log = str(local_log)
            except Exception as exc:  # the task died (node lost, worker killed): this submission only
                result = failed(path, f"Ray task failed: {one_line(exc)}")
            results[index] = result
            on_result(index, result)
    finally:
        if started_here:
            ray.shutdown()
    return results
