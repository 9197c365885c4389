"""The fence (harness/parent/fence.py) with one part changed, for A/B runs on the H200: where the census
runs, whether the DONE watcher runs (harness/parent/watcher.py; `all`: in every call, null calls
included, all timed), or whether each worker keeps its
links to the MPS daemon (harness/parent/mps.py). Prints each
worker's calibrated fence cost and, at the end, how long the census took from its launch to every
block counted in (fence.CENSUS_MAX_S is the limit), over the null calls and over every timed call.
The rest of the command line is eval.py's.
With --null-steps, each worker also runs null calls doing each of a fenced call's own steps (its
events, one kernel or fifty, the output's copy; harness/worker/fence_side.py NULL_STEPS) and prints
their intervals: fifty kernels less one, over 49, is what each further kernel of a call costs under
the fence (against CUPTI's gaps between a many-kernel call's kernels, lab/cupti_compare.py).
Usage: python3 lab/fence_ab.py [--census mid|gate|off] [--watch on|off|all] [--keep-view] [--null-steps] -- EVAL_ARGS...
"""
import argparse
import atexit
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.api import fence, launch  # noqa: E402
from harness.api import main  # noqa: E402


STEP_SETS = ((), ("events",), ("kernel",), ("kernels",), ("events", "kernel"), ("events", "kernel", "copy"))


def patch(census: str, keep_view: bool, null_steps: bool = False, watch: str = "on") -> None:
    fence.Fence.census_at = None if census == "off" else census
    fence.Fence.watch_done, fence.Fence.watch_all = watch == "on", watch == "all"
    calibrate = fence.Fence.calibrate

    def calibrated(self, null_call):
        try:
            calibrate(self, null_call)
            if null_steps:
                steps_report(self, null_call)
        finally:
            report(self)

    def steps_report(self, null_call):
        for nbytes in (1 << 17, 1 << 23):
            for steps in STEP_SETS:
                times = self.null_series(null_call, nbytes, steps, 28)[4:]
                print(f"[fence_ab] null steps {'+'.join(steps) or 'none':<18} {nbytes >> 11:>5} KiB out: "
                      f"min {min(times) * 1e6:6.1f} p25 {statistics.quantiles(times, n=4)[0] * 1e6:6.1f} "
                      f"med {statistics.median(times) * 1e6:6.1f} max {max(times) * 1e6:6.1f} µs",
                      file=sys.stderr, flush=True)

    def report(self):
        base, per_byte = self.cost or (float("nan"), float("nan"))
        spread = "; ".join(f"{n >> 10} KiB: min {min(t) * 1e6:.1f} med {statistics.median(t) * 1e6:.1f} "
                           f"max {max(t) * 1e6:.1f}" for n, t in getattr(self, "null_times", {}).items())
        print(f"[fence_ab] census {census}, watcher {watch}, view {'kept' if keep_view else 'closed'}: fence cost "
              f"{base * 1e6:.2f} µs + {per_byte * 1e12:.3f} µs/MB; null calls µs {spread}", file=sys.stderr, flush=True)

    fence.Fence.calibrate = calibrated
    run, times = fence.Fence.run, []

    def timed_run(self, *args, **kwargs):
        reading = run(self, *args, **kwargs)
        if reading is not None:
            times.append(reading.census_s)
        return reading

    def census_report():
        if times:
            ordered = sorted(times)
            print(f"[fence_ab] census µs over {len(times)} fenced runs (null calls included): median "
                  f"{statistics.median(ordered) * 1e6:.1f}, p99 {ordered[int(0.99 * (len(ordered) - 1))] * 1e6:.1f}, "
                  f"max {ordered[-1] * 1e6:.1f}; over {fence.CENSUS_MAX_S * 1e6:.0f} µs: "
                  f"{sum(t > fence.CENSUS_MAX_S for t in times)}", file=sys.stderr, flush=True)

    fence.Fence.run = timed_run
    atexit.register(census_report)
    if keep_view:
        close = launch.WorkerProcess.close_mps_view
        launch.WorkerProcess.close_mps_view = lambda self, remove=False: close(self, remove) if remove else None


if __name__ == "__main__":
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser()
    parser.add_argument("--census", choices=("mid", "gate", "off"), default="mid")
    parser.add_argument("--watch", choices=("on", "off", "all"), default="on")
    parser.add_argument("--keep-view", action="store_true")
    parser.add_argument("--null-steps", action="store_true")
    args = parser.parse_args(argv[:split])
    patch(args.census, args.keep_view, args.null_steps, args.watch)
    sys.argv = ["eval.py", *argv[split + 1:]]
    sys.exit(main())
