#!/usr/bin/env bash
# The device run behind issue 7's timing evidence (BENCHMARKS.md), in one call:
#   1. lab/timing_experiments.py: the harness's flushed, launch-hidden time against rotated
#      buffers, no flush, CUDA-graph replays and the profiler's kernel durations;
#   2. wall time of `--mode leaderboard` and `--mode test` for one fast submission, twice
#      (repeatability), with the run's own time breakdown;
#   4. `--graph` timing, and its fallback for a submission that cannot be captured.
# CASES="" skips step 1.
# Usage, on the GPU machine from the repo root:  bash lab/h200_timing.sh [SUBMISSION]
set -uo pipefail
TIMEFORMAT="wall %R s"
export PYTHONUNBUFFERED=1
OUT=${OUT:-results/device}
SUB=${1:-submissions/triton_bf16.py}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1 && [ -z "${PYTHONPATH:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
LOG="$OUT/timing.txt"
: > "$LOG"
if [ "${CASES-0,1,2,5,7}" != "" ]; then
  echo "== 1. timing experiments ($SUB)" | tee -a "$LOG"
  timeout "${EXPERIMENT_SECONDS:-180}" python3 lab/timing_experiments.py "$SUB" --cases "${CASES-0,1,2,5,7}" 2>&1 | tee -a "$LOG"
fi
for run in 1 2; do
  echo "== 2.$run leaderboard wall time ($SUB)" | tee -a "$LOG"
  { time timeout 120 python3 eval.py --mode leaderboard --no-progress --submission "$SUB" \
    --db /tmp/timing.db --logs /tmp/mla-logs; } 2>&1 | tee -a "$LOG"
done
for run in 1 2; do
  echo "== 3.$run test wall time ($SUB)" | tee -a "$LOG"
  { time timeout 120 python3 eval.py --mode test --no-progress --submission "$SUB" \
    --db /tmp/timing.db --logs /tmp/mla-logs; } 2>&1 | tee -a "$LOG"
done
echo "== 4. --graph: CUDA-graph replays ($SUB), and a submission that cannot be captured" | tee -a "$LOG"
{ time timeout 120 python3 eval.py --mode leaderboard --graph --no-progress --submission "$SUB" \
  --db /tmp/timing.db --logs /tmp/mla-logs; } 2>&1 | tee -a "$LOG"
timeout 120 python3 eval.py --mode benchmark --small --graph --budget 0.5 --no-progress \
  --submission submissions/torch_loop.py --db /tmp/timing.db --logs /tmp/mla-logs 2>&1 | tee -a "$LOG"
