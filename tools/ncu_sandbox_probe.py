"""Does Nsight Compute see the kernels of a process inside the worker's sandbox, and how fast?
tools/ncu_probe.py under the audit's ncu options: no sandbox, the audit's sandbox (network, IPC and
/dev/shm shared with the host), and variants that keep the IPC namespace private or also share
/tmp. Prints the kernels each report attributes to the probe's case 3 and the probe's time for
its 20 small kernels (device script; run by tools/h200_sandbox.sh)."""
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from harness.audit import find_ncu, kernel_times, ncu_command, per_case  # noqa: E402
from harness.launch import bwrap_command, find_bwrap  # noqa: E402

probe = [sys.executable, str(ROOT / "tools" / "ncu_probe.py"), "20"]
with tempfile.TemporaryDirectory() as tmp:
    scratch = Path(tmp)
    audit_box = bwrap_command(find_bwrap(), ROOT / "tools" / "ncu_probe.py", scratch, (), share_net=True)
    private_ipc = [x for x in audit_box if x != "--"] + ["--unshare-ipc", "--"]
    host_tmp = [x for x in audit_box if x != "--"] + ["--bind", "/tmp", "/tmp", "--"]
    for name, wrap in (("no sandbox", []), ("audit sandbox", audit_box), ("private IPC ns", private_ipc),
                       ("host /tmp too", host_tmp)):
        report = scratch / f"{name.replace(' ', '_').replace('/', '')}.csv"
        run = subprocess.run(ncu_command(find_ncu(), report) + wrap + probe, capture_output=True, text=True,
                             timeout=120)
        text = report.read_text(errors="replace") if report.exists() else ""
        kernels = kernel_times(text)
        print(f"{name:18s} exit {run.returncode}: {len(kernels)} kernels, per case {per_case(kernels)}; "
              f"stderr tail: {' | '.join(run.stderr.strip().splitlines()[-2:])[:200]}")
