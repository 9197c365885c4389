"""Does Nsight Compute see the kernels of a process inside the worker's sandbox, and how fast?
tools/ncu_probe.py under the audit's ncu options: without a sandbox, and with ncu inside it (as
the audit runs it), launching back to back, synchronizing after each kernel, or beside a second
process under the profiler. Prints each report's kernel count, the probe's time for its small
kernels, the processes the probe can see, and the wall time (device script; run by tools/h200_sandbox.sh; BENCHMARKS.md session 7)."""
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from harness.audit import find_ncu, kernel_times, ncu_command  # noqa: E402
from harness.launch import bwrap_command, find_bwrap  # noqa: E402

probe = [sys.executable, str(ROOT / "tools" / "ncu_probe.py"), sys.argv[1] if len(sys.argv) > 1 else "30"]
with tempfile.TemporaryDirectory() as tmp:
    box = bwrap_command(find_bwrap(), ROOT / "tools" / "ncu_probe.py", Path(tmp), ())
    ncu = ncu_command(find_ncu())
    # ncu outside the sandbox (the probe across its PID namespace): ~110 ms per kernel with the
    # host's network and /dev/shm shared, a hang without (BENCHMARKS.md session 7); not run again
    for name, cmd in (("no sandbox", ncu + probe), ("ncu inside sandbox", box + ncu + probe),
                      ("inside, sync each", box + ncu + probe + ["sync"]),
                      ("inside, two processes", box + ncu + probe + ["twin"])):
        t0 = time.perf_counter()
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
            code, out, err = run.returncode, run.stdout, run.stderr
        except subprocess.TimeoutExpired:
            code, out, err = "timeout", "", ""
        wall = time.perf_counter() - t0
        try:
            kernels = len(kernel_times(out))
        except ValueError as exc:
            kernels = f"unreadable report ({exc})"
        notes = " | ".join(line for line in err.splitlines() if "small kernels" in line or "in sight" in line)
        print(f"{name:20s} exit {code}: wall {wall:5.1f} s, {kernels} kernels; {notes[:200]}", flush=True)
