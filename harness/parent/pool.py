"""Many submissions at once: one trusted evaluator process per GPU (or per CPU worker), or Ray.

The trust model is the sequential one, moved into processes: an *evaluator* is harness code
(trusted) that runs `engine.evaluate` for one submission at a time; `evaluate` starts the
submission's own untrusted worker as its child, so submission code still runs only there. The
driver (the CLI process) hands out jobs, collects each `SubmissionResult` and alone writes the
database. An evaluator is pinned to its GPU through CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES,
set before it initialises the GPU and inherited by its workers.

What must not overlap for timings to stay clean: two timed runs on one GPU (the flush and the
events assume the GPU is ours), and so many evaluators that the host's cores are short (host
launch time feeds the launch-hiding busy work). So: one evaluator per GPU for benchmark and
leaderboard runs; more per GPU only for `--mode test`, where nothing is timed.
"""

from __future__ import annotations

import os
import signal
import tempfile
import traceback
from collections import deque
from multiprocessing import connection
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch.multiprocessing as tmp

from harness.config import RunConfig



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


class PoolError(RuntimeError):
    pass


def slot_envs(gpus: int, workers: int, vendor: str) -> list[dict[str, str]]:
    """The environment of each evaluator: `workers` of them spread round-robin over `gpus` GPUs
    (none pinned when gpus == 0: CPU workers)."""
    if gpus == 0:
        return [{"CUDA_VISIBLE_DEVICES": ""} for _ in range(workers)]  # keep CPU workers off any GPU
    var = "HIP_VISIBLE_DEVICES" if vendor == "amd" else "CUDA_VISIBLE_DEVICES"
    return [{var: str(i % gpus)} for i in range(workers)]


def failed(path: Path, error: str):
    from harness.results import SubmissionResult

    return SubmissionResult(str(path), "", ok=False, error=error)


def harness_error(path: Path, exc: Exception):
    """The result of a file the parent itself failed on: that file fails, one printable line."""
    from harness.worker.channel import printable_line

    return failed(path, printable_line(f"harness error: {type(exc).__name__}: {exc}")[:400])


def _evaluator_main(conn: Any, config: RunConfig, env: dict[str, str]) -> None:
    """An evaluator process: pin the device, build the context once, then evaluate job after job."""
    os.environ.update(env)  # before anything initialises the GPU; the workers it starts inherit it
    tempfile.tempdir = None  # read again from TMPDIR: the slot's folder
    from harness.device import CONTEXT_LOST, context_ok
    from harness.parent.engine import evaluate
    from harness.parent.context import run_context

    ctx = run_context(config)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        index, path = job
        try:
            result = evaluate(Path(path), ctx, config.mode)
        except Exception as exc:  # a harness failure on this submission: report it, go on
            traceback.print_exc()
            result = harness_error(Path(path), exc)
        lost = not context_ok(ctx.device)
        if lost and result.ok:
            result = failed(Path(path), CONTEXT_LOST)
        elif lost:
            result.error = result.error or CONTEXT_LOST
        conn.send(("result", index, result))
        if lost:  # no later job can run here: the pool starts a fresh evaluator for the next one
            return


class _Slot:
    def __init__(self, config: RunConfig, env: dict[str, str]):
        self.config, self.env = config, env
        self.job: Optional[tuple[int, Path]] = None
        # The evaluator's temporary folders (its workers' scratch) go into one of the slot's own,
        # removed when the slot stops: an evaluator that is killed cannot remove what it made.
        self.folder = Path(tempfile.mkdtemp(prefix="mla-eval-evaluator-"))
        ctx = tmp.get_context("spawn")
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_evaluator_main, args=(child, config, {**env, "TMPDIR": str(self.folder)}),
                                daemon=False, name=f"evaluator {env}")
        self.proc.start()
        child.close()
        self.ready = False

    def death(self) -> str:
        return how_it_ended(self.proc)[0]

    def stop(self) -> None:
        try:
            stop(self.proc, self.conn, None, grace=10)
        finally:  # (an interrupt during the grace period included)
            self.kill()

    def kill(self) -> None:
        """End the evaluator now (its sandboxed workers die with it) and remove its folder."""
        from harness.parent.launch import remove_scratch

        if self.proc.is_alive():
            self.proc.kill()
        remove_scratch(self.folder)


def stop_slots(slots: Sequence[Any]) -> None:
    """Stop every evaluator, each with its grace period; a second Ctrl-C or SIGTERM while one is
    given its grace ends the rest at once instead of leaving them running (and their folders)."""
    try:
        for slot in slots:
            slot.stop()  # (kills and removes its own, however its grace ends)
    except BaseException:
        for slot in slots:
            slot.kill()
        raise


def short_of_time(result: Any) -> bool:
    """Whether a result failed in a way a neighbour can cause by taking the host's CPU, memory or
    process IDs: a timeout or a crashed worker (reasons only the parent writes: a submission's own
    exception text starts with "exception:")."""
    reasons = [result.error] + [c.reason for c in result.cases if not c.ok]
    return not result.ok and any(r.startswith(("timeout:", "crashed:", "evaluator process")) for r in reasons)


def evaluate_parallel(paths: Sequence[Path], config: RunConfig, envs: Sequence[dict[str, str]],
                      on_result: Callable[[int, Any], None] = lambda i, r: None,
                      on_again: Callable[[Path], None] = lambda path: None) -> list:
    """Evaluate `paths` on len(envs) evaluator processes; results in the order of `paths`.

    An evaluator that dies (killed, crashed) costs only the submission it was evaluating: that
    one is reported failed with the reason, and a fresh evaluator takes the slot. The evaluators
    share the host, and a submission can starve the others of CPU, memory or process IDs (a worker's
    processes each in a session of their own get a scheduler share each): a file that timed out or
    crashed beside other evaluators is evaluated again alone at the end (`on_again` is told), and
    that verdict stands.
    """
    results: list = [None] * len(paths)
    crowded = len(envs) > 1 and len(paths) > 1
    again: list[int] = []

    def finish(index: int, result: Any) -> None:
        if crowded and short_of_time(result):
            again.append(index)
            return
        results[index] = result
        on_result(index, result)

    _drain(deque(enumerate(paths)), config, envs[:max(1, min(len(envs), len(paths)))], finish)
    if again:
        for index in again:
            on_again(paths[index])

        def final(index: int, result: Any) -> None:
            results[index] = result
            on_result(index, result)

        _drain(deque((i, paths[i]) for i in again), config, envs[:1], final)
    return results


def _drain(pending: deque, config: RunConfig, envs: Sequence[dict[str, str]], finish: Callable[[int, Any], None]) -> None:
    """Evaluate the (index, path) jobs of `pending` on one evaluator per env, each result to `finish`."""
    slots = [_Slot(config, env) for env in envs]
    try:
        while pending or any(s.job for s in slots):
            for slot in slots:
                if slot.ready and slot.job is None and pending:
                    slot.job = pending.popleft()
                    slot.conn.send((slot.job[0], str(slot.job[1])))
            waitables = {s.conn: s for s in slots}
            waitables.update({s.proc.sentinel: s for s in slots})
            for slot in {waitables[w] for w in connection.wait(list(waitables))}:
                try:
                    msg = slot.conn.recv() if slot.conn.poll(0) else None
                except (EOFError, OSError):
                    msg = None
                if msg is None and slot.proc.is_alive():
                    continue
                if msg is None:  # the evaluator died
                    why = slot.death()
                    if slot.job is not None:
                        index, path = slot.job
                        finish(index, failed(path, f"evaluator process {why} while evaluating this submission"))
                    elif not slot.ready:
                        raise PoolError(f"an evaluator process {why} while starting (see the traceback above)")
                    slot.stop()
                    slots.remove(slot)
                    if pending:
                        slots.append(_Slot(config, slot.env))
                elif msg[0] == "ready":
                    slot.ready = True
                elif msg[0] == "result":
                    finish(msg[1], msg[2])
                    slot.job = None
    finally:
        stop_slots(slots)
