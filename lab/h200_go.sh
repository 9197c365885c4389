# The fence with its GO flag: census position A/B on two bundled files, then the honest multi-kernel
# and CUDA-graph files beside triton_bf16 (fenced leaderboard) and an independent CUPTI measurement of
# each (lab/cupti_compare.py). Usage (device machine, wheels in .whl): bash lab/h200_go.sh
source lab/h200_setup.sh
for variant in ${VARIANTS:-mid gate}; do
  timeout 200 python3 lab/fence_ab.py --census $variant -- --mode leaderboard --sandbox require --no-progress \
    --budget 1 --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
    --logs "/tmp/logs_$variant" --json "$OUT/ab_$variant.json" > "$OUT/ab_$variant.txt" 2>&1; echo "== $variant: exit $?"
  grep "fence_ab" "$OUT/ab_$variant.txt"
done
H=tests/honest
start=$(date +%s)
timeout 300 python3 eval.py --mode leaderboard --sandbox require --no-progress --budget 1 \
  --submission $H/multi_kernel.py --submission $H/cuda_graph.py --submission submissions/triton_bf16.py \
  --logs /tmp/logs_honest --json "$OUT/honest.json" > "$OUT/honest.txt" 2>&1; echo "honest leaderboard: exit $? in $(( $(date +%s) - start )) s"
for f in $H/multi_kernel.py $H/cuda_graph.py submissions/triton_bf16.py; do
  n=$(basename "$f" .py)
  timeout 150 python3 lab/cupti_compare.py "$f" --calls 20 --json "$OUT/cupti_$n.json" \
    --compare "$OUT/honest.json" > "$OUT/cupti_$n.txt" 2>&1; echo "cupti $n: exit $?"
done
for v in ${VARIANTS:-mid gate}; do python3 lab/fence_table.py "$OUT/ab_$v.json" | grep -v "^ *test"; done
python3 lab/fence_table.py "$OUT/honest.json" | grep -v "^ *test"
for f in $H/multi_kernel.py $H/cuda_graph.py submissions/triton_bf16.py; do tail -n 14 "$OUT/cupti_$(basename "$f" .py).txt"; done
