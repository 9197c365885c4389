"""Why does a call's host time read higher in the harness's worker than in one process? (GPU)

The worker receives its inputs from the parent through CUDA IPC and sends each output back the
same way. This times the host side of one call (CPU wall from call to return, the harness's
`CallTimer`) of a submission on one benchmark case, in a spawned child, five ways:

  inputs            output                 what it isolates
  IPC from parent   sent back over IPC     what the harness's worker does
  IPC from parent   kept in the child      the cost of exporting each output
  cloned in child   sent back over IPC     the cost of IPC inputs
  cloned in child   kept in the child      a plain process
  IPC from parent   copied into a buffer   a candidate fix: one output buffer shared per case,
                    shared once            each output copied into it after the timing

and the same call in the parent itself. Finding (BENCHMARKS.md, session 3): here, exporting each
output costs +40-50 µs of host time at small shapes and the shared buffer recovers most of it,
but the same change inside the harness made no difference in a same-machine A/B, so it was not
adopted; what makes the worker's host times ~2x the in-process ones is still open.

Usage (GPU machine, repo root):
    python lab/host_time_check.py submissions/triton_bf16.py [--case 0] [--calls 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.multiprocessing as mp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _host_medians(fn, data, conn, calls, l2_bytes, send_output, buffer=None):
    from harness.api import CallTimer

    timer = CallTimer("cuda", l2_bytes)
    host, device = [], []
    for i in range(calls + 5):
        out, t = timer(fn, data, timed=True)
        if buffer is not None:
            buffer.copy_(out)
            torch.cuda.synchronize()
            conn.send(("copied",))
            conn.recv()
        elif send_output:
            conn.send(("out", out))
            conn.recv()  # the parent has cloned and dropped it
        if i >= 5:
            host.append(t["host_s"] * 1e6)
            device.append(t["device_s"] * 1e6)
    return statistics.median(host), statistics.median(device)


def child(conn, submission, calls, l2_bytes):
    sys.path.insert(0, str(ROOT))
    from harness.api import clone_tree  # the engine's copy of an input tree
    from lab.knob_sweep import load

    fn = load(submission, 0, {}).custom_kernel
    data, buffer = conn.recv()
    rows = []
    for inputs in ("IPC", "cloned"):
        use = data if inputs == "IPC" else clone_tree(data)
        for send in (True, False):
            h, d = _host_medians(fn, use, conn, calls, l2_bytes, send)
            rows.append((inputs, "sent over IPC" if send else "kept", h, d))
    h, d = _host_medians(fn, data, conn, calls, l2_bytes, False, buffer)
    rows.append(("IPC", "copied into a buffer shared once", h, d))
    conn.send(("done", rows))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("submission")
    parser.add_argument("--case", type=int, default=0)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()

    from harness.api import detect
    from harness.api import load_problem
    from lab.knob_sweep import load

    info = detect("cuda")
    problem = load_problem(ROOT / "task.yml")
    case = problem.spec.cases("benchmark")[args.case]
    data = problem.generate(case.args, case.seed, info.torch_device)
    fn = load(args.submission, 1, {}).custom_kernel
    here = _host_medians(fn, data, None, args.calls, info.l2_bytes, False)

    ctx = mp.get_context("spawn")
    conn, child_conn = ctx.Pipe()
    proc = ctx.Process(target=child, args=(child_conn, args.submission, args.calls, info.l2_bytes))
    proc.start()
    from reference import output_layout

    shape, dtype = output_layout(data)
    buffer = torch.empty(shape, dtype=dtype, device=info.torch_device)
    conn.send((data, buffer))
    while True:
        msg = conn.recv()
        if msg[0] == "done":
            rows = msg[1]
            break
        copy = (msg[1] if msg[0] == "out" else buffer).clone()  # what the harness's parent does with an output
        del msg, copy
        conn.send("ok")
    proc.join()
    print(f"\n{Path(args.submission).name}, {problem.label(case.args)}, {info.describe()}, median of {args.calls} calls")
    print("| process | inputs | output | host µs | device µs |")
    print("|---|---|---|---|---|")
    print(f"| parent | its own | kept | {here[0]:.0f} | {here[1]:.1f} |")
    for inputs, output, h, d in rows:
        print(f"| child | {inputs} | {output} | {h:.0f} | {d:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
