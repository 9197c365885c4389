#!/usr/bin/env bash
# The device run recorded in BENCHMARKS.md, in one call (device time is scarce):
#   1. the full leaderboard of submissions/ on the task's benchmark shapes;
#   2. the GPU-only exploits (tests/zoo_gpu) on the small shapes, and the side-stream one on the
#      full-size shapes: each must be rejected;
#   3. the check's self-test on the full-size cases;
#   4. one call of one case under Nsight Compute (--ncu).
# Usage, on the GPU machine from the repo root:  bash lab/h200_run.sh   (logs under $OUT)
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-results/device}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then  # wheels the GPU image lacks (kernelguard)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } | tee "$OUT/gpu.txt"
DB="$OUT/mla-eval.db"
t0=$(date +%s)
echo "== 1. leaderboard" | tee "$OUT/leaderboard.txt"
timeout "${LEADERBOARD_SECONDS:-300}" python3 eval.py --mode leaderboard --budget "${BUDGET:-5}" --no-progress --db "$DB" --logs /tmp/mla-logs "$@" \
  2>&1 | tee -a "$OUT/leaderboard.txt"
echo "leaderboard exit ${PIPESTATUS[0]}, wall $(( $(date +%s) - t0 )) s so far" | tee -a "$OUT/leaderboard.txt"
echo "== 2. GPU-only exploits (small shapes)" | tee "$OUT/zoo.txt"
timeout ${ZOO_SECONDS:-75} python3 eval.py --mode benchmark --small --no-progress --db "$DB" --logs /tmp/mla-logs \
  --submission tests/zoo_gpu/side_stream.py --submission tests/zoo_gpu/patches_events.py \
  --submission tests/zoo_gpu/replaces_event_class.py --submission submissions/torch_batched.py 2>&1 | tee -a "$OUT/zoo.txt"
echo "== 2b. side stream on the full-size shapes: hidden work past the floor or the tail rule" | tee -a "$OUT/zoo.txt"
timeout ${ZOO_FULL_SECONDS:-120} python3 eval.py --mode benchmark --budget 1 --no-progress --db "$DB" --logs /tmp/mla-logs \
  --submission tests/zoo_gpu/side_stream.py 2>&1 | tee -a "$OUT/zoo.txt"
echo "== 3. check self-test, full-size cases" | tee "$OUT/selftest.txt"
timeout "${SELFTEST_SECONDS:-60}" python3 eval.py --mode selftest 2>&1 | tee -a "$OUT/selftest.txt"
echo "total wall $(( $(date +%s) - t0 )) s" | tee -a "$OUT/selftest.txt"
echo "== 4. one call under Nsight Compute" | tee "$OUT/ncu.txt"
timeout "${NCU_SECONDS:-90}" python3 eval.py --mode profile --ncu --case 0 --submission submissions/triton_bf16.py \
  --logs /tmp/mla-logs 2>&1 | tail -40 | tee -a "$OUT/ncu.txt"
tar czf "$OUT/logs.tgz" -C /tmp mla-logs 2>/dev/null
