"""The fence's DONE watcher (harness/parent/watcher.py) on a GPU, in one process: does its kernel sample
the offsets its Python twin (`watcher.offsets`) says and read the right words, and does it tell an
output finished before DONE from one written after? (issue 37: an early DONE hid the output's copy in
the parent's wake-up, docs/threat-model.md "Still open" (3).)

1. DONE already written: the kernel returns at once; its offsets must equal `offsets(seed, nwords)` and
   its values the slot's words there.
2. --calls rounds of two orders on a stream of the "worker's", with the watcher launched first on
   another stream and waiting on DONE: honest (a sleep, the output's copy, DONE) must give 0 changed
   words in every round; early (a sleep, DONE, the copy) must give changed words in every round. The
   slot is filled with 0xFF bytes before each round, as the parent fills it.
Prints how long the watcher polled, and one line per check. Exit 0: every check held.

Usage (GPU machine, repo root): python3 lab/watcher_check.py [--calls 50] [--bytes 65536]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--bytes", type=int, default=64 * 1024)
    args = parser.parse_args()
    import torch

    from harness.api import Buffer, fence, watcher

    buffer = Buffer(4096, "cuda")
    buffer.bytes_tensor().zero_()
    flags = fence.StreamFlags(buffer)
    done = flags.base + fence.DONE
    watch = watcher.DoneWatcher()
    slot = torch.empty(args.bytes // 2, dtype=torch.bfloat16, device="cuda")
    answer = torch.randn_like(slot)
    nwords = slot.numel() // 2
    ok = True

    slot.copy_(answer)
    started = torch.zeros(1, dtype=torch.int32, device="cuda")
    watch.launch(torch.cuda.current_stream(), done, 0, slot, 1.0, started.data_ptr())
    torch.cuda.synchronize()
    out = watch.out.cpu()
    at = out[4:4 + watcher.SAMPLES].tolist()
    same_offsets = at == watcher.offsets(watch.seed, nwords)
    same_values = out[4 + watcher.SAMPLES:].tolist() == slot.view(torch.int32)[at].tolist()
    print(f"offsets as watcher.offsets says: {same_offsets}; values as the slot holds: {same_values}; "
          f"seen: {int(out[0]) == 1}")
    ok &= same_offsets and same_values and int(out[0]) == 1

    worker, parent = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda._sleep(1000)  # (loaded before the streams wait)
    torch.cuda.synchronize()
    seq, results = 0, {"honest": [], "early": []}
    polled = []
    for _ in range(args.calls):
        for order in results:
            seq += 1
            snapshot = torch.empty_like(slot)
            slot.view(torch.uint8).fill_(0xFF)
            torch.cuda.synchronize()
            watch.launch(parent, done, seq, slot, 1.0, started.data_ptr())
            with torch.cuda.stream(worker):
                torch.cuda._sleep(20_000)  # (~10 µs: the watcher is polling before DONE)
                if order == "honest":
                    slot.copy_(answer)
                flags.write(worker, fence.DONE, seq)
                if order == "early":
                    slot.copy_(answer)
            parent.wait_stream(worker)
            with torch.cuda.stream(parent):
                snapshot.copy_(slot)
            torch.cuda.synchronize()
            seen, changed = watch.changed(snapshot)
            results[order].append(changed if seen else -1)
            polled.append(int(watch.out[2:4].view(torch.int64).item()) / 1e3)
    honest, early = results["honest"], results["early"]
    print(f"honest (copy, then DONE): changed words per round min {min(honest)} max {max(honest)}; "
          f"early (DONE, then copy): min {min(early)} max {max(early)} of {watcher.SAMPLES}")
    print(f"watcher polled a median {statistics.median(polled):.1f} µs before it saw DONE")
    ok &= max(honest) == 0 and min(honest) == 0 and min(early) > 0
    print("watcher_check:", "every check held" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
