#!/usr/bin/env bash
# The device run recorded in BENCHMARKS.md: the full leaderboard on the lent GPU.
# Usage (device tool, repo root): bash tools/h200_leaderboard.sh   (writes under $OUT)
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-results/device}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
start=$(date +%s)
timeout 540 python3 eval.py --mode leaderboard --no-progress --db "$OUT/mla-eval.db" --logs "$OUT/logs" "$@" \
  2>&1 | tee "$OUT/leaderboard.txt"
echo "exit ${PIPESTATUS[0]}, wall $(( $(date +%s) - start )) s" | tee -a "$OUT/leaderboard.txt"
