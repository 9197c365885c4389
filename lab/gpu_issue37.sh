# Issue 37 on one GPU, within ~5 minutes (LOOP=1: ~2 more): the one-file wall; the bundled Triton files and the
# honest multi-kernel and CUDA-graph files under lab/fence_ab.py (census times against
# fence.CENSUS_MAX_S, hand-over-only null calls); the census-holding attacks; CUPTI beside the
# bundled bf16 run; with LOOP=1, torch_loop's wall fenced against --no-audit. Test files are made
# standalone first (lab/standalone.py: the sandbox shows a worker only its own file).
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37.sh
source lab/h200_setup.sh
S=/tmp/standalone
python3 lab/standalone.py $S tests/zoo_gpu/holds_sms_at_census.py tests/zoo_gpu/resident_at_gate.py \
  tests/honest/multi_kernel.py tests/honest/cuda_graph.py tests/zoo_gpu/writes_into_slot.py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s.%N)
wall() { python3 -c "import time;print(round(time.time()-$1,1))"; }
timeout 60 python3 eval.py --mode leaderboard --sandbox require --no-progress --submission submissions/triton_bf16.py \
  --logs /tmp/l1 --json "$OUT/one.json" > "$OUT/one.txt" 2>&1
echo "one file (triton_bf16, default budget): exit $? wall $(wall $t0) s"
AB="python3 lab/fence_ab.py --census mid -- --mode leaderboard --sandbox require --no-progress"
timeout 200 $AB --budget 0.3 --diagnostics --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
  --submission submissions/triton_mxfp4.py --submission $S/multi_kernel.py --submission $S/cuda_graph.py \
  --logs /tmp/l2 --json "$OUT/honest.json" > "$OUT/honest.txt" 2>&1; echo "honest: exit $? at $(wall $t0) s"
timeout 100 $AB --budget 0.3 --timeout 30 --submission $S/writes_into_slot.py --submission submissions/triton_bf16.py \
  --submission $S/holds_sms_at_census.py --submission $S/resident_at_gate.py --logs /tmp/l3 --json "$OUT/attacks.json" > "$OUT/attacks.txt" 2>&1
echo "attacks: exit $? at $(wall $t0) s"
for f in triton_bf16; do
  timeout 45 python3 lab/cupti_compare.py submissions/$f.py --calls 10 --compare "$OUT/honest.json" \
    > "$OUT/cupti_$f.txt" 2>&1; echo "cupti $f: exit $? at $(wall $t0) s"
done
if [ -n "${LOOP:-}" ]; then
t1=$(date +%s.%N)
timeout 50 python3 eval.py --mode leaderboard --no-audit --sandbox require --no-progress --budget 0.2 \
  --submission submissions/torch_loop.py --logs /tmp/l4 --json "$OUT/loop_plain.json" > "$OUT/loop_plain.txt" 2>&1
echo "torch_loop --no-audit: exit $? wall $(wall $t1) s"
t1=$(date +%s.%N)
timeout 50 python3 eval.py --mode leaderboard --sandbox require --no-progress --budget 0.2 \
  --submission submissions/torch_loop.py --logs /tmp/l5 --json "$OUT/loop_fenced.json" > "$OUT/loop_fenced.txt" 2>&1
echo "torch_loop fenced: exit $? wall $(wall $t1) s"
fi
tar czf "$OUT/logs37.tgz" -C /tmp l2 l3 2>/dev/null
echo "--- one file"; grep "geomean\|wall\|clocks" "$OUT/one.txt" | tail -3 | cut -c1-200
echo "--- honest"; grep "fence_ab\|wall" "$OUT/honest.txt" | cut -c1-250; python3 lab/fence_table.py "$OUT/honest.json" | grep -v "^ *test"
echo "--- attacks"; grep "fence_ab\|wall" "$OUT/attacks.txt" | cut -c1-250; python3 lab/fence_table.py "$OUT/attacks.json" | grep -v "^ *test [^1]" | cut -c1-250
echo "--- cupti"; tail -10 "$OUT/cupti_triton_bf16.txt"
echo "--- torch_loop"; grep "wall\|geomean" "$OUT/loop_plain.txt" "$OUT/loop_fenced.txt" | cut -c1-200
