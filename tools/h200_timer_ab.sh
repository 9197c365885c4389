#!/usr/bin/env bash
# The worker timer's busy-work sizing, A/B on the H200 (device tool, carry .whl): the audited
# leaderboard of the three bundled Triton files, run from two copies of this checkout,
#   old: busy work 1.2x a running mean of host times (halving weights), never grown;
#   new: this checkout's CallTimer (BUSY_MARGIN x the longest of the last HOST_WINDOW host times,
#        doubled after a call whose GPU caught up).
# Both copies report every case's caught-up count (CAUGHT_UP_SHIFT patched to -1 so the warning
# prints whenever a call caught up), so the table compares median / audit (the profiler's GPU time per call) with how
# often the GPU reached the start event before the call's launches were queued.
#   OUT=<folder> ORDER="old new" bash tools/h200_timer_ab.sh
source tools/h200_setup.sh
WORK=${WORK:-/tmp/timer_ab}
rm -rf "$WORK"; mkdir -p "$WORK"
for arm in old new; do
  mkdir -p "$WORK/$arm" && tar --exclude=./results --exclude=./.whl --exclude=./.git -cf - . | tar -xf - -C "$WORK/$arm"
  sed -i 's/^CAUGHT_UP_SHIFT = .*/CAUGHT_UP_SHIFT = -1.0/' "$WORK/$arm/harness/timing.py"
  grep -q '^CAUGHT_UP_SHIFT = -1.0' "$WORK/$arm/harness/timing.py" || { echo "CAUGHT_UP_SHIFT not found"; exit 1; }
done
python3 - "$WORK/old/harness/worker/timer.py" <<'PY'
import re, sys
path = sys.argv[1]
src = open(path).read()
new = '''    def busy_seconds(self) -> float:
        """(A/B arm "old") 1.2x a running mean of host times, halving weights."""
        estimate = 0.0
        for host in self._host_times:
            estimate = host if estimate == 0 else 0.5 * (estimate + host)
        return 1.2 * estimate
'''
src, n = re.subn(r'    def busy_seconds\(self\) -> float:\n.*?\n        return .*?\n', new, src, flags=re.S)
assert n == 1, "busy_seconds not found"
src, n = re.subn(r'MAX_BOOST = \d+', 'MAX_BOOST = 1', src)
assert n == 1, "MAX_BOOST not found"
open(path, "w").write(src)
PY
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())"
for arm in ${ORDER:-old new}; do
  t0=$(date +%s)
  (cd "$WORK/$arm" && timeout ${LEADERBOARD_SECONDS:-300} python3 eval.py --mode leaderboard --budget 2 --no-progress \
     --db "$WORK/$arm.db" --logs "$WORK/$arm-logs" --sandbox require --json "$OUT/$arm.json" \
     --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
     --submission submissions/triton_mxfp4.py > "$OUT/$arm.txt" 2>&1)
  echo "$arm leaderboard rc=$? wall $(( $(date +%s) - t0 )) s"
done
python3 - "$OUT" ${ORDER:-old new} <<'PY'
import json, re, sys
out, arms = sys.argv[1], sys.argv[2:]
fmt = lambda x: "-" if x is None else f"{x:.2f}"
for arm in arms:
    rows = [r for r in json.load(open(f"{out}/{arm}.json"))["rows"] if r.get("kind") == "benchmark"]
    print(f"== {arm}: median/audit, min/audit, caught-up calls (of timed), host µs")
    by_file = {}
    for r in rows:
        m = re.search(r"before (\d+) of (\d+) timed", r.get("warnings") or "")
        caught = f"{m.group(1)}/{m.group(2)}" if m else f"0/{r['runs']}"
        a = r.get("audit_us")
        ratio = (r["median_us"] / a) if a and r.get("median_us") else None
        low = (r["min_us"] / a) if a and r.get("min_us") else None
        by_file.setdefault(r["submission"], []).append(f"{r['case']}:{fmt(ratio)}/{fmt(low)} {caught} h{r.get('host_us') or 0:.0f}")
    for name, cells in by_file.items():
        print(f"  {name}: geomean {next(r.get('geomean_us') for r in json.load(open(f'{out}/{arm}.json'))['rows'] if r['submission'] == name):.1f}")
        print("    " + " | ".join(cells))
PY
