"""Does Nsight Compute see the kernels of a process inside the worker's sandbox, and how fast?
lab/ncu_probe.py under the audit's ncu options: without a sandbox, and with ncu inside it (as
the audit runs it), launching back to back, synchronizing after each kernel, or beside a second
process under the profiler. Prints each report's kernel count, the probe's time for its small
kernels, the processes the probe can see, and the wall time (device script; run by lab/h200_sandbox.sh; BENCHMARKS.md session 7).

`variants N`: what each of the audit's ncu options costs per kernel, ncu inside the sandbox as the
audit runs it: the audit's options, then each variant, at N kernels and at N // 5 (the difference
is the per-kernel cost, without the start-up)."""
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from harness.api import find_ncu, kernel_times, ncu_command  # noqa: E402
from harness.api import bwrap_command, find_bwrap  # noqa: E402



def run_probe(cmd: list[str]) -> tuple[object, str, str, float]:
    """Run `cmd`; where it starts with the sandbox, with a fresh one (bwrap reads its seccomp filter's
    descriptor to the end)."""
    box = None
    if "--seccomp" in cmd:
        box = bwrap_command(find_bwrap(), ROOT / "lab" / "ncu_probe.py", ())
        cmd = box + cmd[cmd.index("--") + 1:]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=90, pass_fds=box.fds if box else ())
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        code, out, err = "timeout", "", ""
    finally:
        if box:
            box.close()
    return code, out, err, time.perf_counter() - t0


def without(cmd: list[str], option: str, values: int) -> list[str]:
    at = cmd.index(option)
    return cmd[:at] + cmd[at + 1 + values:]


def variants(n: int) -> None:
    ncu = ncu_command(find_ncu())
    at = ncu.index("--cache-control") + 1
    no_flush = ncu[:at] + ["none"] + ncu[at + 1:]
    options = {"audit's options": ncu, "--cache-control none": no_flush,
               "no --nvtx": without(without(ncu, "--print-nvtx-rename", 1), "--nvtx", 0),
               "--target-processes application-only": ncu[:2] + ["application-only"] + ncu[3:],
               "--cache-control none, no --nvtx": without(without(no_flush, "--print-nvtx-rename", 1), "--nvtx", 0)}
    print("| ncu options (inside the sandbox) | probe s, N//5 kernels | probe s, N kernels | ms per kernel | kernels in report | wall s (N) |")
    print("|---|---|---|---|---|---|")
    box = bwrap_command(find_bwrap(), ROOT / "lab" / "ncu_probe.py", ())
    for name, flags in options.items():
        times, seen, wall = [], "?", 0.0
        for count in (n // 5, n):
            code, out, err, wall = run_probe(box + flags + [sys.executable, str(ROOT / "lab" / "ncu_probe.py"), str(count)])
            found = [line.split(": ")[-1] for line in err.splitlines() if "small kernels" in line]
            times.append(float(found[0].rstrip(" s")) if found and code == 0 else float("nan"))
            try:
                seen = len(kernel_times(out))
            except ValueError as exc:
                seen = f"unreadable ({str(exc)[:60]})"
        per = (times[1] - times[0]) / (n - n // 5) * 1e3
        print(f"| {name} | {times[0]:.2f} | {times[1]:.2f} | {per:.1f} | {seen} | {wall:.1f} |", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "variants":
        variants(int(sys.argv[2]) if len(sys.argv) > 2 else 200)
        sys.exit(0)
    probe = [sys.executable, str(ROOT / "lab" / "ncu_probe.py"), sys.argv[1] if len(sys.argv) > 1 else "30"]
    box = bwrap_command(find_bwrap(), ROOT / "lab" / "ncu_probe.py", ())
    ncu = ncu_command(find_ncu())
    # ncu outside the sandbox (the probe across its PID namespace): ~110 ms per kernel with the
    # host's network and /dev/shm shared, a hang without (BENCHMARKS.md session 7); not run again
    for name, cmd in (("no sandbox", ncu + probe), ("ncu inside sandbox", box + ncu + probe),
                      ("inside, sync each", box + ncu + probe + ["sync"]),
                      ("inside, two processes", box + ncu + probe + ["twin"])):
        code, out, err, wall = run_probe(cmd)
        try:
            kernels = len(kernel_times(out))
        except ValueError as exc:
            kernels = f"unreadable report ({exc})"
        notes = " | ".join(line for line in err.splitlines() if "small kernels" in line or "in sight" in line)
        print(f"{name:20s} exit {code}: wall {wall:5.1f} s, {kernels} kernels; {notes[:200]}", flush=True)


if __name__ == "__main__":
    main()
