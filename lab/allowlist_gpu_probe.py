"""Device check of the sandbox's allow-list (issue 38, harness/parent/allowlist.py): this file, run inside
the sandbox exactly as a worker's submission is (bound by itself, nothing else of the checkout),
makes a CUDA context, compiles a Triton kernel (its launcher built by the C compiler inside the
sandbox, against libcuda found through the loader's cache) and checks its answer. Prints the view
(each entry, kind and why), then the child's lines; exit code 0 when the child succeeded.

    python lab/allowlist_gpu_probe.py          # on the GPU machine
"""

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child() -> None:
    started = time.perf_counter()
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add(x, y, out, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = i < n
        tl.store(out + i, tl.load(x + i, mask=mask) + tl.load(y + i, mask=mask), mask=mask)

    x = torch.randn(4096, device="cuda")
    y = torch.randn_like(x)
    out = torch.empty_like(x)
    add[(4,)](x, y, out, x.numel(), BLOCK=1024)
    torch.cuda.synchronize()
    ok = bool(torch.allclose(out, x + y))
    print(f"child: {torch.cuda.get_device_name(0)}, Triton {triton.__version__} kernel "
          f"{'right' if ok else 'WRONG'}, {time.perf_counter() - started:.1f} s", flush=True)
    print("child: Triton cache:", sorted(os.listdir(os.environ["TRITON_CACHE_DIR"]))[:4], flush=True)
    sys.exit(0 if ok else 1)


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from harness.api import allowed_paths
    from harness.api import bwrap_command, child_env, find_bwrap

    me = Path(__file__).resolve()
    for entry in allowed_paths(me):
        source = f" <- {entry.source}" if entry.source not in (None, entry.path) else ""
        print(f"{entry.kind:8} {entry.path}{source}  ({entry.why})")
    box = bwrap_command(find_bwrap(), me, [])
    try:
        run = subprocess.run(box + [sys.executable, str(me), "child"], pass_fds=box.fds, env=child_env(),
                             capture_output=True, text=True, timeout=600)
    finally:
        box.close()
    print(run.stdout, end="")
    if run.returncode != 0:
        print(f"child exited {run.returncode}:\n{run.stderr[-4000:]}")
    return run.returncode


if __name__ == "__main__":
    if sys.argv[1:] == ["child"]:
        child()
    sys.exit(main())
