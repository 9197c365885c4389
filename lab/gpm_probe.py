"""Probe: can NVML's GPU Performance Monitoring (GPM), read from another process, time a call's GPU work?

Each window is two GPM samples around some work; the script prints what the GPU's counters say
about it beside what CUDA events (and, for the submission calls, a CUPTI trace) say.
Usage (GPU machine): python lab/gpm_probe.py [submissions/triton_bf16.py]
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pynvml as N
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METRICS = {"gr_util": 1, "sm_util": 2, "dram_util": 10, "pcie_tx_mibs": 20, "pcie_rx_mibs": 21,
           "sm_cyc_elapsed": 248, "sm_cyc_active": 249, "pcie_tx": 255, "pcie_rx": 256}


class GPM:
    def __init__(self, index: int = 0):
        N.nvmlInit()
        self.dev = N.nvmlDeviceGetHandleByIndex(index)
        support = N.nvmlGpmQueryDeviceSupport(self.dev)
        print("gpm supported:", support.isSupportedDevice, flush=True)
        self.pool = [N.nvmlGpmSampleAlloc() for _ in range(4)]
        self.turn = 0

    def sample(self):
        s = self.pool[self.turn % 4]
        self.turn += 1
        t0 = time.perf_counter()
        N.nvmlGpmSampleGet(self.dev, s)
        t1 = time.perf_counter()
        return s, t0, t1

    def metrics(self, a, b) -> dict:
        mg = N.c_nvmlGpmMetricsGet_t()
        mg.version = N.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(METRICS)
        mg.sample1, mg.sample2 = a[0], b[0]
        for i, mid in enumerate(METRICS.values()):
            mg.metrics[i].metricId = mid
        N.nvmlGpmMetricsGet(mg)
        out = {}
        for i, name in enumerate(METRICS):
            m = mg.metrics[i]
            out[name] = m.value if m.nvmlReturn == 0 else f"err{m.nvmlReturn}"
        mid_a, mid_b = (a[1] + a[2]) / 2, (b[1] + b[2]) / 2
        out["host_us"] = (mid_b - mid_a) * 1e6
        out["lat_us"] = ((a[2] - a[1]) + (b[2] - b[1])) / 2 * 1e6
        if isinstance(out["gr_util"], float):
            out["gr_active_us"] = out["gr_util"] / 100 * out["host_us"]
        return out


def window(gpm: GPM, work, sync=True) -> dict:
    torch.cuda.synchronize()
    a = gpm.sample()
    work()
    if sync:
        torch.cuda.synchronize()
    b = gpm.sample()
    return gpm.metrics(a, b)


def events(work) -> float:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    s.record()
    work()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3


def summary(rows: list[dict], key: str) -> str:
    xs = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    if not xs:
        return f"{key}: n/a {rows[0].get(key) if rows else ''}"
    return f"{key}: med {statistics.median(xs):.3f} min {min(xs):.3f} max {max(xs):.3f}"


def main() -> None:
    out = Path(os.environ.get("OUT", "results/device"))
    out.mkdir(parents=True, exist_ok=True)
    log = {}
    gpm = GPM()
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    buf = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")

    # latency of a sample
    lats = []
    for _ in range(200):
        _, t0, t1 = gpm.sample()
        lats.append((t1 - t0) * 1e6)
    print(f"sample latency us: med {statistics.median(lats):.1f} p90 {sorted(lats)[180]:.1f} max {max(lats):.1f}")
    log["latency"] = lats

    table = []

    def probe(name, work, reps=15, ev=True):
        rows = [window(gpm, work) for _ in range(reps)]
        evs = [events(work) for _ in range(5)] if ev else [0.0]
        log[name] = {"rows": rows, "events_us": evs}
        act = [r["gr_active_us"] for r in rows if "gr_active_us" in r]
        cyc = [r["sm_cyc_active"] for r in rows if isinstance(r["sm_cyc_active"], float)]
        ela = [r["sm_cyc_elapsed"] for r in rows if isinstance(r["sm_cyc_elapsed"], float)]
        line = (f"{name:28s} events {statistics.median(evs):9.1f}  gr_active med {statistics.median(act) if act else -1:9.1f} "
                f"[{min(act) if act else -1:8.1f},{max(act) if act else -1:8.1f}]  util {statistics.median([r['gr_util'] for r in rows if isinstance(r['gr_util'], float)] or [-1]):6.2f}% "
                f"host {statistics.median([r['host_us'] for r in rows]):8.1f}  smcyc_act {statistics.median(cyc) if cyc else -1:.4g} "
                f"smcyc_ela {statistics.median(ela) if ela else -1:.4g} dram {statistics.median([r['dram_util'] for r in rows if isinstance(r['dram_util'], float)] or [-1]):.2f}% "
                f"pcie_tx {statistics.median([r['pcie_tx'] for r in rows if isinstance(r['pcie_tx'], float)] or [-1]):.4g} "
                f"pcie_rx {statistics.median([r['pcie_rx'] for r in rows if isinstance(r['pcie_rx'], float)] or [-1]):.4g}")
        print(line, flush=True)
        table.append(line)

    def section(fn):
        try:
            fn()
        except Exception as exc:  # noqa: BLE001
            print("section failed:", fn.__name__, type(exc).__name__, exc, flush=True)

    def basics():
        probe("idle (host sleep 200us)", lambda: time.sleep(200e-6), ev=False)
        for mb in (1, 16, 128, 512, 2048):
            n = mb << 20
            probe(f"memset {mb} MiB", lambda n=n: buf[:n].zero_())
        for cyc in (20_000, 200_000, 2_000_000):
            probe(f"_sleep {cyc} cycles", lambda c=cyc: torch.cuda._sleep(c))

        def gaps():
            for _ in range(20):
                buf[:1 << 20].zero_()
                t = time.perf_counter()
                while time.perf_counter() - t < 50e-6:
                    pass
        probe("20 x memset1MiB, 50us gaps", gaps)
        src, dst = buf[: 1 << 30], torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        probe("copy_ d2d 1 GiB", lambda: dst.copy_(src))
        host = torch.empty(64 << 20, dtype=torch.uint8, pin_memory=True)
        probe("copy_ d2h 64 MiB pinned", lambda: host.copy_(buf[: 64 << 20]))
        probe("copy_ h2d 64 MiB pinned", lambda: buf[: 64 << 20].copy_(host))
        small = torch.empty(16 << 10, dtype=torch.uint8, pin_memory=True)
        probe("copy_ d2h 16 KiB", lambda: small.copy_(buf[: 16 << 10]))

    def cross_process():
        code = ("import torch,time,sys; b=torch.empty(512<<20,dtype=torch.uint8,device='cuda'); b.zero_(); torch.cuda.synchronize();"
                "print('ready',flush=True); sys.stdin.readline();"
                "[b.zero_() for _ in range(10)]; torch.cuda.synchronize(); print('done',flush=True)")
        p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        a = gpm.sample()
        p.stdin.write("go\n"); p.stdin.flush()
        assert p.stdout.readline().strip() == "done"
        b = gpm.sample()
        m = gpm.metrics(a, b)
        p.wait()
        ev = events(lambda: [buf[: 512 << 20].zero_() for _ in range(10)])
        line = f"cross-process 10x memset512: gr_active {m['gr_active_us']:.1f} us (own events for same work {ev:.1f}) host {m['host_us']:.1f}"
        print(line, flush=True)
        table.append(line)
        log["cross"] = m

    def submission_calls():
        path = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "submissions/triton_bf16.py")
        import reference
        from harness.api import load_module
        from torch.profiler import ProfilerActivity, profile
        kernel = load_module(path).custom_kernel
        flush = torch.empty(120 << 20, dtype=torch.uint8, device="cuda")
        words = flush.view(torch.float32)
        sink = torch.zeros((), device="cuda")
        for b, l in ((4, 1024), (32, 1024), (32, 8192), (64, 8192), (256, 8192)):
            data = reference.generate_input(batchsize=b, qseqlen=1, kvseqlen=l, seed=7)
            for _ in range(3):
                kernel(data)
            torch.cuda.synchronize()
            rows, evs = [], []
            for _ in range(30):
                flush.zero_(); torch.sum(words, 0, out=sink); torch.cuda.synchronize()
                a = gpm.sample()
                kernel(data)
                torch.cuda.synchronize()
                bb = gpm.sample()
                rows.append(gpm.metrics(a, bb))
            for _ in range(10):  # events with launches hidden behind busy work (the harness's way)
                for _ in range(20):
                    flush.zero_()
                torch.sum(words, 0, out=sink)
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); kernel(data); e.record(); e.synchronize()
                evs.append(s.elapsed_time(e) * 1e3)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    flush.zero_(); torch.sum(words, 0, out=sink); torch.cuda.synchronize()
                    kernel(data)
                    torch.cuda.synchronize()
            kern = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            own = [e for e in kern if "reduce" not in e.name and "fill" not in e.name.lower() and "FillFunctor" not in e.name]
            cupti = sum(e.device_time for e in own) / 5
            act = [r["gr_active_us"] for r in rows]
            dram = [r["dram_util"] for r in rows]
            line = (f"{Path(path).stem} {b}x{l}: events {statistics.median(evs):8.1f}  cupti {cupti:8.1f}  gr_active med {statistics.median(act):8.1f} "
                    f"[{min(act):.1f},{max(act):.1f}] sd {statistics.pstdev(act):.2f} host {statistics.median([r['host_us'] for r in rows]):8.1f} "
                    f"dram% {statistics.median(dram):.2f} smcyc_act {statistics.median([r['sm_cyc_active'] for r in rows if isinstance(r['sm_cyc_active'], float)] or [-1]):.4g}")
            print(line, flush=True)
            table.append(line)
            log[f"sub {b}x{l}"] = {"rows": rows, "events": evs, "cupti": cupti, "cupti_names": sorted({e.name[:60] for e in own})}

    for fn in (basics, cross_process, submission_calls):
        section(fn)
    (out / "gpm_probe.json").write_text(json.dumps(log, default=str))
    print("\n==== summary ====")
    print("\n".join(table))


if __name__ == "__main__":
    main()
