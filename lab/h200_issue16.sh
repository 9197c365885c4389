#!/usr/bin/env bash
# Issue 16's measurement on the H200 (device tool, carry .whl): the harness's audited leaderboard of
# the bundled Triton files (and any more given as arguments), then Nsight Compute on chosen cases.
#   OUT=<folder> PROFILE="fp8:5 bf16:0" bash lab/h200_issue16.sh [more submission files]
#   PROFILE: <file suffix>:<benchmark case index> pairs; LEADERBOARD_SECONDS overrides the timeout;
#   HOST="bf16 mxfp4": lab/host_probe.py on those files (HOST_CASES, default 0,6,7).
# The device tool brings back at most 8 files: $OUT gets the leaderboard's Markdown and JSON, its
# console output and one text report per profiled case; the database, logs and .ncu-rep stay in $WORK.
source lab/h200_setup.sh
WORK=${WORK:-/tmp/issue16}
mkdir -p "$WORK"
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())"
SUBS=(); for f in submissions/triton_bf16.py submissions/triton_fp8.py submissions/triton_mxfp4.py "$@"; do SUBS+=(--submission "$f"); done
t0=$(date +%s)
timeout ${LEADERBOARD_SECONDS:-330} python3 eval.py --mode leaderboard --budget 2 --no-progress --db "$WORK/lb.db" \
  --logs "$WORK/logs" --sandbox require --json "$OUT/lb.json" --markdown "$OUT/lb.md" "${SUBS[@]}" > "$OUT/leaderboard.txt" 2>&1
echo "leaderboard rc=$? wall $(( $(date +%s) - t0 )) s"; grep -E "copy bandwidth|^Run:" "$OUT/leaderboard.txt" | head -3
for file in ${HOST:-}; do
  timeout 120 python3 lab/host_probe.py "submissions/triton_$file.py" --cases "${HOST_CASES:-0,6,7}" 2>&1 | tail -5
done
export PATH=$PATH:/usr/local/cuda/bin
for pair in ${PROFILE:-}; do
  file=${pair%%:*}; case=${pair##*:}; rep="$WORK/${file}_case$case"
  timeout 120 ncu -f --profile-from-start off --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats -k regex:mla_decode -o "$rep" \
    python3 lab/ncu_case.py "submissions/triton_$file.py" "$case" > "$rep.log" 2>&1
  ncu --import "$rep.ncu-rep" --page details --print-units base > "$OUT/${file}_case$case.txt" 2>&1
  echo "== $file case $case"; grep -E "^  [a-z_]+|Duration|DRAM Throughput|L1/TEX Cache Throughput|Warp Cycles Per Issued|Eligible Warps|Achieved Occupancy|Registers Per|spends|represents about" "$OUT/${file}_case$case.txt" | head -16
done
python3 - "$OUT/lb.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
fmt = lambda x: "-" if x is None else f"{x:.1f}"
table = {}
for r in rows:
    t = table.setdefault(r["submission"], {"geomean": r.get("geomean_us"), "passed": r.get("passed"), "cases": []})
    if r.get("kind") == "benchmark":
        t["cases"].append((r["case"], r.get("median_us"), r.get("pct_bandwidth"), r.get("audit_us")))
for name, t in sorted(table.items(), key=lambda kv: kv[1]["geomean"] or 1e9):
    print(f"{name} passed={t['passed']} geomean={fmt(t['geomean'])} error={next((r['error'] for r in rows if r['submission'] == name and r.get('error')), None)}")
    print("  us    " + " ".join(f"{c}={fmt(m)}" for c, m, _, _ in t["cases"]))
    print("  %BW   " + " ".join(fmt(p) for _, _, p, _ in t["cases"]))
    print("  audit " + " ".join(fmt(a) for *_, a in t["cases"]))
# Each case's spread, as the warning rules see it: std / median (the rule before session 20), the
# middle half's span / median, calls over 2x the median; then the case's warnings.
import statistics
for r in rows:
    xs = r.get("samples_us") or []
    if r.get("kind") == "benchmark" and len(xs) > 1:
        med = statistics.median(xs); q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
        slow = sum(x > 2 * med for x in xs)
        print(f"spread {r['submission']} {r['case']}: n={len(xs)} first={xs[0]:.0f} std={statistics.stdev(xs) / med:.0%} "
              f"mid-half={(q3 - q1) / med:.1%} slow={slow} max={max(xs):.0f} | {r.get('warnings') or '-'}")
PY
