"""What a fault in one MPS client does to the others, and whether new clients work afterwards.

The driver (this process) starts the run's MPS daemon (harness/parent/mps.py) and makes no CUDA context of
its own. Per scenario: client B (a bystander) makes a context and waits; client A either runs a
long kernel and is killed with SIGKILL mid-kernel ("killed"), or writes through a wild pointer
("fault"). Then B synchronizes (did A's end reach it?), B exits, and a fresh client C runs a kernel
(does the daemon serve new clients once every client of the old server is gone?).
Usage (NVIDIA GPU): python3 lab/mps_fault_probe.py
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CLIENT = textwrap.dedent(r"""
    import ctypes, sys, time
    sys.path.insert(0, sys.argv[2])
    import torch
    role = sys.argv[1]
    x = torch.zeros(1, device="cuda"); x.add_(1); torch.cuda.synchronize()
    print(role, "ready", flush=True)
    if role == "killed":
        torch.cuda._sleep(4_000_000_000)   # ~2 s of GPU time; the driver kills this process meanwhile
        time.sleep(30)
    elif role == "fault":
        from harness.api import driver_call as _call
        ptx = b".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry wild()\n{\n .reg .b64 %rd<2>;\n mov.u64 %rd1, 8;\n st.global.u32 [%rd1], 1;\n ret;\n}\n"
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        _call("ModuleLoadData", ctypes.byref(mod), ctypes.c_char_p(ptx))
        _call("ModuleGetFunction", ctypes.byref(fn), mod, b"wild")
        _call("LaunchKernel", fn, 1, 1, 1, 1, 1, 1, 0, None, None, None)
        try:
            torch.cuda.synchronize(); print("fault: no error", flush=True)
        except Exception as e:
            print("fault: own error:", str(e).splitlines()[0][:100], flush=True)
    elif role == "bystander":
        sys.stdin.readline()
        try:
            x.add_(1); torch.cuda.synchronize(); print("bystander: ok", flush=True)
        except Exception as e:
            print("bystander: error:", str(e).splitlines()[0][:100], flush=True)
    else:  # fresh
        try:
            y = torch.ones(1 << 20, device="cuda"); s = float(y.sum()); print("fresh: ok", s, flush=True)
        except Exception as e:
            print("fresh: error:", str(e).splitlines()[0][:100], flush=True)
""")


def client(role: str, stdin=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CLIENT, role, str(ROOT)], stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def line(proc: subprocess.Popen, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = proc.stdout.readline()
        if text and not text.startswith(("Traceback", " ")):
            return text.strip()
        if not text and proc.poll() is not None:
            return f"(exited {proc.returncode})"
    return "(no answer)"


def main() -> None:
    from harness.api import mps

    print("mps.start:", mps.start())
    for scenario in ("killed", "fault"):
        bystander = client("bystander", stdin=subprocess.PIPE)
        print(f"[{scenario}]", line(bystander))
        a = client(scenario)
        print(f"[{scenario}]", line(a))
        if scenario == "killed":
            time.sleep(0.5)
            a.kill()
            a.wait()
            print(f"[{scenario}] A killed mid-kernel")
        else:
            print(f"[{scenario}]", line(a))
            a.wait(timeout=60)
        bystander.stdin.write("go\n")
        bystander.stdin.flush()
        print(f"[{scenario}]", line(bystander))
        bystander.wait(timeout=60)
        time.sleep(1)
        fresh = client("fresh")
        print(f"[{scenario}] after every old client exited:", line(fresh, 90))
        fresh.wait(timeout=60)


if __name__ == "__main__":
    main()
