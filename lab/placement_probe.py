"""Does where a call's inputs sit in GPU memory move its time? (issue 37: small cases of the same file
differ by several % between workers while each worker's own samples are tight.)

In one process, a submission's call at one benchmark case is timed with CUDA events, in the fence's
order (every input but q refilled, L2 flushed by writing then reading 2x its size, q refilled,
synchronised; then a spin kernel that outlasts the call's launches, the events, the call and the
copy of its output into a slot). The inputs are placed in P places: each placement is a fresh deep
copy of the inputs allocated after a padding tensor of a different size, so the same values sit at
different addresses. The placements are timed round-robin, ROUNDS times, N calls each time: if a
placement's median repeats from round to round while the placements differ, placement moves the
time; if all placements agree within this process but separate runs of this probe differ, something
per process does.

Usage (GPU machine, repo root):
    python3 lab/placement_probe.py FILE [--case 0] [--places 6] [--rounds 2] [--calls 40] [--reload] [--reflush]
(--reload: each placement imports the submission afresh, so buffers it keeps between calls move too;
--reflush: each placement flushes L2 with a buffer of its own.)
Prints one line per placement and round (median µs, IQR) and a last line with the spread of the
placements' medians against the round-to-round spread of each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("submission")
    parser.add_argument("--case", type=int, default=0)
    parser.add_argument("--places", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--reload", action="store_true",
                        help="import the submission afresh for each placement (its own buffers move too)")
    parser.add_argument("--reflush", action="store_true",
                        help="a flush buffer of its own for each placement (where the flush's lines sit moves too)")
    args = parser.parse_args()
    import torch

    sys.path.insert(0, str(ROOT))
    from harness.api import clone_tree, compat, detect, load_module, load_problem, tensors

    device = detect("cuda")
    dev = device.torch_device
    compat.install()
    problem = load_problem(ROOT / "task.yml")
    case = problem.spec.cases("benchmark", False)[args.case]
    flush_bytes = max(2 * device.l2_bytes, 1 << 20) // 4 * 4
    flush = torch.zeros(flush_bytes, dtype=torch.uint8, device=dev)
    sink = torch.zeros((), dtype=torch.float32, device=dev)
    source = problem.generate(case.args, case.seed, dev)
    fresh = [t for _, t in tensors(source)]
    places, pads = [], []
    for p in range(args.places):
        pads.append(torch.empty((p * 7 + 3) * (1 << 20) + p * 4096 * 3, dtype=torch.uint8, device=dev))
        data = clone_tree(source)
        shape, dtype = problem.layout(data)
        if p == 0 or args.reload:
            kernel = load_module(args.submission, f"placement_submission_{p}").custom_kernel
        if p and args.reflush:
            flush = torch.zeros(flush_bytes, dtype=torch.uint8, device=dev)
        places.append((data, [t for _, t in tensors(data)], torch.empty(shape, dtype=dtype, device=dev), kernel,
                       flush))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed(place) -> float:
        data, shared, slot, kernel, flush = place
        for dst, src in list(zip(shared, fresh))[1:]:
            dst.copy_(src)
        flush.zero_()
        torch.sum(flush.view(torch.float32), 0, out=sink)
        shared[0].copy_(fresh[0])
        torch.cuda.synchronize()
        torch.cuda._sleep(2_000_000)  # ~1 ms at ~2 GHz: the call's launches queue behind it
        start.record()
        slot.copy_(kernel(data))
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0

    for place in places:  # warm-up: compile, per-address caches of the submission
        for _ in range(3):
            timed(place)
    medians: dict[int, list[float]] = {p: [] for p in range(args.places)}
    label = problem.label(case.args)
    for r in range(args.rounds):
        for p, place in enumerate(places):
            xs = sorted(timed(place) for _ in range(args.calls))
            med = statistics.median(xs)
            medians[p].append(med)
            q1, q3 = xs[len(xs) // 4], xs[3 * len(xs) // 4]
            ptr = place[1][0].data_ptr()
            print(f"{label} round {r} place {p} (q at 0x{ptr:x}): median {med:8.2f} µs, IQR {q1:.2f}-{q3:.2f}")
    means = [statistics.mean(v) for v in medians.values()]
    across = (max(means) - min(means)) / min(means) * 100
    within = max((max(v) - min(v)) / min(v) * 100 for v in medians.values())
    print(f"{Path(args.submission).name} {label}: placements' medians {min(means):.2f}-{max(means):.2f} µs "
          f"(spread {across:.1f}%), largest round-to-round spread of one placement {within:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
