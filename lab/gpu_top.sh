# The numbers BENCHMARKS.md's top section shows (lab/benchmarks_top.py reads top.json), and the
# one-file leaderboard's wall: every bundled Triton file and torch_batched, fenced, default budget.
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_top.sh
source lab/h200_setup.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
LB="python3 eval.py --mode leaderboard --sandbox require --no-progress"
timeout 45 $LB --submission submissions/triton_bf16.py --logs /tmp/t1 > "$OUT/one.txt" 2>&1
echo "one file: exit $? $(grep '^wall' "$OUT/one.txt")"
timeout 120 $LB --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
  --submission submissions/triton_mxfp4.py --submission submissions/torch_batched.py --logs /tmp/t2 \
  --json "$OUT/top.json" > "$OUT/top.txt" 2>&1
echo "leaderboard: exit $? $(grep '^wall' "$OUT/top.txt")"
grep -E "^[a-z_0-9]+\.py: (pass|FAIL)" "$OUT/top.txt" | cut -c1-200
