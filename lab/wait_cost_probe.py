"""Probe: does a stream that waits on a flag (cuStreamWaitValue32) slow the kernels another stream
runs meanwhile? The fence's parent stream waits on DONE while the worker's kernels run, and
many-kernel calls rank ~1 µs per kernel above CUPTI's span under the fence (BENCHMARKS.md).

One process, two streams: W runs the work, P plays the parent. Each rep, timed by events on W around
the work only (E1 -> E2), in four arrangements:
  alone    W: spin, E1, work, E2                      (P idle)
  gated    P: spin, GATE := seq; W: wait GATE, E1, work, E2, DONE := seq   (P does not wait)
  fenced   as gated, and P then waits DONE >= seq and records E3 (the fence's shape)
  waiting  W: spin, E1, work, E2, DONE := seq; P waits DONE (no gate)
The work is N one-element adds (N = 1 and 50: per kernel = the difference / 49) and, with --file,
a submission's call on a benchmark case (the harness's own inputs). Run it with and without an MPS
daemon; it prints one line per arrangement and work.

Usage (GPU machine, repo root): python3 lab/wait_cost_probe.py [--file F.py --case 0] [--reps 40]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

GATE, DONE = 0, 4
SPIN = 6_000_000  # cycles of the spin before the work (~3 ms: longer than the host takes to launch it)


class Flags:
    def __init__(self, words: "torch.Tensor | None" = None) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        self._wait = getattr(lib, "cuStreamWaitValue32_v2", None) or lib.cuStreamWaitValue32
        self._write = getattr(lib, "cuStreamWriteValue32_v2", None) or lib.cuStreamWriteValue32
        for fn in (self._wait, self._write):
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        self.words = torch.zeros(1024, dtype=torch.int32, device="cuda") if words is None else words
        self.base = self.words.data_ptr()

    def wait(self, stream: torch.cuda.Stream, flag: int, value: int) -> None:
        assert self._wait(ctypes.c_void_p(stream.cuda_stream), self.base + flag, value, 0) == 0

    def write(self, stream: torch.cuda.Stream, flag: int, value: int) -> None:
        assert self._write(ctypes.c_void_p(stream.cuda_stream), self.base + flag, value, 0) == 0


def blocking_stream() -> torch.cuda.ExternalStream:
    lib = ctypes.CDLL("libcuda.so.1")
    handle = ctypes.c_void_p()
    assert lib.cuStreamCreate(ctypes.byref(handle), 0) == 0
    return torch.cuda.ExternalStream(handle.value)


def adds(n: int):
    one = torch.zeros(1, device="cuda")

    def work() -> None:
        for _ in range(n):
            one.add_(1)
    return work


def submission_work(path: str, case_index: int):
    from harness.api import compat, load_module, load_problem

    compat.install()
    problem = load_problem(str(ROOT / "task.yml"))
    case = problem.spec.cases("benchmark", False)[case_index]
    data = problem.generate(case.args, case.seed, torch.device("cuda"))
    kernel = load_module(path, "probe_submission").custom_kernel
    return (lambda: kernel(data)), problem.label(case.args)


def measure(arrangement: str, work, reps: int, flags: Flags, seq0: int) -> tuple[list[float], list[float], int]:
    w, p = torch.cuda.Stream(), torch.cuda.Stream()
    inner, outer, seq = [], [], seq0
    for rep in range(reps + 3):
        seq += 1
        e1, e2, e3 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        torch.cuda.synchronize()
        if arrangement in ("gated", "fenced"):
            with torch.cuda.stream(p):
                torch.cuda._sleep(SPIN)
                flags.write(p, GATE, seq)
                if arrangement == "fenced":
                    flags.wait(p, DONE, seq)
                    e3.record(p)
        with torch.cuda.stream(w):
            if arrangement in ("gated", "fenced"):
                flags.wait(w, GATE, seq)
            else:
                torch.cuda._sleep(SPIN)
            if arrangement == "waiting":
                with torch.cuda.stream(p):
                    flags.wait(p, DONE, seq)
                    e3.record(p)
            e1.record(w)
            work()
            e2.record(w)
            flags.write(w, DONE, seq)
        torch.cuda.synchronize()
        if rep >= 3:
            inner.append(e1.elapsed_time(e2) * 1e3)
            if arrangement in ("fenced", "waiting"):
                outer.append(e1.elapsed_time(e3) * 1e3)
    return inner, outer, seq


def child(conn, words, file: "str | None", case_index: int, stream_kind: str) -> None:
    """The other process's side (--two-process): the work on its own stream, as the fence's worker."""
    flags = Flags(words)
    works = {"1 add": adds(1), "50 adds": adds(50)}
    if file:
        fn, label = submission_work(file, case_index)
        works["file"] = fn
    for work in works.values():
        work()
    torch.cuda.synchronize()
    w = (torch.cuda.current_stream() if stream_kind == "default" else torch.cuda.Stream() if stream_kind == "own"
         else blocking_stream())
    conn.send("up")
    while True:
        msg = conn.recv()
        if msg[0] == "exit":
            return
        _, name, arrangement, seq = msg
        e1, e2 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(w):
            if arrangement == "alone":
                torch.cuda._sleep(SPIN)
            else:
                flags.wait(w, GATE, seq)
            e1.record(w)
            works[name]()
            e2.record(w)
            flags.write(w, DONE, seq)
        conn.send("enqueued")
        conn.recv()
        w.synchronize()
        conn.send(e1.elapsed_time(e2) * 1e3)


def two_process(args: argparse.Namespace) -> None:
    """P here, W in a child process (two MPS clients, as the fence's parent and worker)."""
    import torch.multiprocessing as mp

    words = torch.zeros(1024, dtype=torch.int32, device="cuda")
    flags = Flags(words)
    ctx = mp.get_context("spawn")
    conn, other = ctx.Pipe()
    proc = ctx.Process(target=child, args=(other, words, args.file, args.case, args.child_stream))
    proc.start()
    assert conn.recv() == "up"
    p = torch.cuda.Stream()
    names = ["1 add", "50 adds"] + (["file"] if args.file else [])
    seq, table = 0, {}
    print(f"{args.label} two processes ({args.child_stream} stream), {torch.cuda.get_device_name()}: µs, median (min) over {args.reps} reps")
    for name in names:
        for arrangement in ("alone", "gated", "fenced"):
            inner, outer = [], []
            for rep in range(args.reps + 3):
                seq += 1
                conn.send(("call", name, arrangement, seq))
                assert conn.recv() == "enqueued"
                mid, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with torch.cuda.stream(p):
                    mid.record(p)
                    if arrangement != "alone":
                        flags.write(p, GATE, seq)
                    if arrangement == "fenced":
                        flags.wait(p, DONE, seq)
                    end.record(p)
                conn.send("sync")
                took = conn.recv()
                p.synchronize()
                if rep >= 3:
                    inner.append(took)
                    if arrangement == "fenced":
                        outer.append(mid.elapsed_time(end) * 1e3)
            table[(name, arrangement)] = statistics.median(inner)
            tail = f"  mid->end {statistics.median(outer):8.2f}" if outer else ""
            print(f"{args.label} 2p {name:<12} {arrangement:<8} E1->E2 {statistics.median(inner):8.2f} "
                  f"({min(inner):8.2f}){tail}")
    for arrangement in ("alone", "gated", "fenced"):
        per = (table[("50 adds", arrangement)] - table[("1 add", arrangement)]) / 49
        print(f"{args.label} 2p per kernel {arrangement:<8} {per:6.3f} µs")
    conn.send(("exit",))
    proc.join(10)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--file")
    parser.add_argument("--case", type=int, default=0)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--label", default="")
    parser.add_argument("--two-process", action="store_true", help="the work in a child process (two MPS clients)")
    parser.add_argument("--child-stream", choices=("own", "default", "blocking"), default="own",
                        help="the child's work on a torch stream (non-blocking), its legacy default stream, or "
                             "a blocking stream of its own (cuStreamCreate, flags 0)")
    args = parser.parse_args()
    if args.two_process:
        two_process(args)
        return 0
    flags = Flags()
    works = [("1 add", adds(1)), ("50 adds", adds(50))]
    if args.file:
        fn, label = submission_work(args.file, args.case)
        works.append((f"{Path(args.file).stem} {label}", fn))
    seq = 0
    print(f"{args.label} {torch.cuda.get_device_name()}: µs, median (min) over {args.reps} reps")
    table = {}
    for name, work in works:
        for _ in range(2):
            work()
        torch.cuda.synchronize()
        for arrangement in ("alone", "gated", "fenced", "waiting"):
            inner, outer, seq = measure(arrangement, work, args.reps, flags, seq)
            table[(name, arrangement)] = statistics.median(inner)
            tail = f"  E1->E3 {statistics.median(outer):8.2f}" if outer else ""
            print(f"{args.label} {name:<28} {arrangement:<8} E1->E2 {statistics.median(inner):8.2f} "
                  f"({min(inner):8.2f}){tail}")
    for arrangement in ("alone", "gated", "fenced", "waiting"):
        per = (table[("50 adds", arrangement)] - table[("1 add", arrangement)]) / 49
        print(f"{args.label} per kernel {arrangement:<8} {per:6.3f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
