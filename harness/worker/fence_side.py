"""The worker's side of the fence before the submission is imported (harness/parent/fence.py): it
maps the parent's flags and answers null calls, GATE then DONE with any of a fenced call's own
steps between, so the parent measures the fence's cost while nothing of the submission's exists.
The protocol is harness/worker/loop.py's (its docstring)."""

from __future__ import annotations

from typing import Any

from harness.worker.channel import Channel


def fence_phase(channel: Channel, timer: Any):
    """Before the import: the parent's fence flags and its null calls (the protocol:
    harness/worker/loop.py); the flags, or None where the parent does not fence."""
    import torch

    from harness.worker.shared_memory import Buffer, StreamFlags

    channel.send({"op": "fence-ready"})
    flags = None
    torch.cuda.synchronize()
    while True:
        msg, fds = channel.recv(want_fds=True)
        op = msg.get("op")
        if op == "fence" and fds:
            buffer = Buffer(int(msg["nbytes"]), "cuda", fds[0])
            buffer.close_fd()
            flags = StreamFlags(buffer)
        elif op == "null" and flags is not None:  # the hand-over, and any of a call's own steps: GATE, then DONE
            try:
                _null_call(flags, int(msg["seq"]), msg.get("steps") or (), int(msg.get("nbytes") or 0), timer)
            except Exception as exc:  # noqa: BLE001 - the harness's own step failed: the parent goes unfenced
                channel.send({"op": "error", "kind": "fence", "message": f"a null call failed: {exc}"[:200]})
                continue
            channel.send({"op": "enqueued"})
        elif op == "import":
            return flags


NULL_STEPS = ("events", "kernel", "kernels", "copy")  # what a null call may do between GATE and DONE
KERNELS = 50  # the one-element adds of the "kernels" step (what each further kernel of a call costs)


def _null_call(flags: Any, seq: int, steps: Any, nbytes: int, timer: Any) -> None:
    """A null call: GATE, then the named steps a fenced call's side has besides the submission's own
    work (its two events; one kernel's launch, a one-element add, or KERNELS of them; a copy of
    `nbytes` like the output's into the slot), then DONE. Each step ran once before, outside the
    fence: a kernel's first launch loads its module, which would wait for the device while the
    stream waits on GATE."""
    import torch

    from harness.worker.shared_memory import call_stream

    if any(step not in NULL_STEPS for step in steps):
        raise ValueError(f"unknown null-call step in {list(steps)}")
    stream = call_stream()  # (the stream a fenced call runs on: harness/worker/loop.py)
    with torch.cuda.stream(stream):
        _null_steps(flags, stream, seq, steps, nbytes, timer)


def _null_steps(flags: Any, stream: Any, seq: int, steps: Any, nbytes: int, timer: Any) -> None:
    import torch

    from harness.worker.shared_memory import DONE, GATE

    one = torch.zeros(1, device="cuda")
    copy = "copy" in steps  # (its buffers made only for a null call that copies)
    source, target = (torch.zeros(max(1, nbytes), dtype=torch.uint8, device="cuda") if copy else None for _ in range(2))
    for warm in (True, False):
        if not warm:
            flags.wait(stream, GATE, seq)
        if "events" in steps:
            begin, end = timer._event(enable_timing=True), timer._event(enable_timing=True)
            timer._record(begin)
        for _ in range(1 if "kernel" in steps else KERNELS if "kernels" in steps else 0):
            one.add_(1)
        if "events" in steps:
            timer._record(end)
        if copy:
            target.copy_(source)
        if warm:
            torch.cuda.synchronize()
    flags.write(stream, DONE, seq)
    _null_call.keep = (one, source, target)  # alive until the stream has run them
