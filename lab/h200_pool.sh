#!/usr/bin/env bash
# The device run behind issue 6's throughput numbers (BENCHMARKS.md): the same submissions
# evaluated sequentially and through the evaluator pool, in test mode (nothing timed: several
# evaluators may share a GPU) and in leaderboard mode (one evaluator per GPU; two on one GPU shown
# once, to measure how much overlapping timed runs distort the numbers).
# Usage, on the GPU machine from the repo root:  bash lab/h200_pool.sh   (log in $OUT/pool.txt)
set -uo pipefail
export PYTHONUNBUFFERED=1
TIMEFORMAT="wall %R s"
OUT=${OUT:-results/device}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1 && [ -z "${PYTHONPATH:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
SUBS=(--submission submissions/triton_bf16.py --submission submissions/triton_fp8.py
      --submission submissions/triton_mxfp4.py --submission submissions/torch_batched.py)
LOG="$OUT/pool.txt"
COMMON=(--no-progress --db /tmp/pool.db --logs /tmp/pool-logs)
: > "$LOG"
run() {  # label, then eval.py arguments
  local label=$1; shift
  echo "== $label: eval.py $*" | tee -a "$LOG"
  { time timeout 200 python3 eval.py "$@" "${COMMON[@]}" "${SUBS[@]}"; } 2>&1 \
    | grep -E "^│ [0-9-]|^wall|pass|FAIL|evaluator|warning|= worker start" | tee -a "$LOG"
}
python3 eval.py --mode test "${COMMON[@]}" --submission submissions/triton_bf16.py >/dev/null 2>&1  # warm caches
run "test, sequential" --mode test
run "test, pool of 4 evaluators on 1 GPU" --mode test --gpus 1 --workers 4
run "leaderboard, sequential" --mode leaderboard --budget 1
run "leaderboard, pool, 1 evaluator per GPU" --mode leaderboard --budget 1 --gpus all
run "leaderboard, pool, 2 evaluators on 1 GPU (timings not clean)" --mode leaderboard --budget 1 --gpus 1 --workers 2
