"""What the OS sandbox adds to starting a worker: time from start to "ready" (torch imported, the
submission imported), sandboxed and not, alternating, on this machine (device script; run by
lab/h200_sandbox.sh)."""
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.api import start_worker  # noqa: E402


def main() -> None:
    ROOT = Path(__file__).resolve().parent.parent
    submission = ROOT / "submissions" / "triton_bf16.py"
    device = sys.argv[1] if len(sys.argv) > 1 else None
    times = {"off": [], "require": []}
    with tempfile.TemporaryDirectory() as logs:
        for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 5):
            for mode in ("off", "require"):
                start = time.perf_counter()
                worker = start_worker(submission, device, Path(logs) / f"{mode}.log", sandbox=mode)
                reply, _ = worker.channel.recv(deadline=time.monotonic() + 120)
                times[mode].append(time.perf_counter() - start)
                assert reply["op"] == "ready", reply
                assert worker.sandboxed == (mode == "require")
                worker.close()
    for mode, xs in times.items():
        print(f"worker start to ready, sandbox {mode:7s}: median {statistics.median(xs):.3f} s  "
              f"({', '.join(f'{x:.3f}' for x in xs)})")
    print(f"sandbox adds {statistics.median(times['require']) - statistics.median(times['off']):+.3f} s (median)")


if __name__ == "__main__":
    main()
