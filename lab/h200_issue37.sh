# Issue 37 on the H200, one pass: the census probe; one bundled file alone (the one-file wall); the
# three bundled files; the fence's attack files with honest files after the ones that may harm later
# files; the L2-warm bound; CUPTI against the bundled run. Prints short tables last.
# Usage (device machine, wheels in .whl): bash lab/h200_issue37.sh
source lab/h200_setup.sh
Z=tests/zoo_gpu
LB="python3 eval.py --mode leaderboard --sandbox require --no-progress"
python3 lab/census_probe.py > "$OUT/census_probe.txt" 2>&1; echo "census_probe: exit $?"
start=$(date +%s.%N)
timeout 120 $LB --submission submissions/triton_bf16.py --logs /tmp/l1 --json "$OUT/one.json" > "$OUT/one.txt" 2>&1
echo "one file (triton_bf16, default budget): exit $? wall $(python3 -c "import time;print(round(time.time()-$start,1))") s"
timeout 300 $LB --budget 1 --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
  --submission submissions/triton_mxfp4.py --logs /tmp/l2 --json "$OUT/bundled.json" > "$OUT/bundled.txt" 2>&1; echo "bundled: exit $?"
timeout 420 $LB --budget 1 --timeout 30 --submission $Z/resident_at_gate.py --submission $Z/preloads_kv.py \
  --submission $Z/prefetches_l2.py --submission $Z/rewrites_done.py --submission $Z/throttles_mps.py \
  --submission submissions/triton_bf16.py --submission $Z/illegal_address.py --submission submissions/triton_fp8.py \
  --logs /tmp/l3 --json "$OUT/attacks.json" > "$OUT/attacks.txt" 2>&1; echo "attacks: exit $?"
cp /tmp/l3/throttles_mps*.log "$OUT/" 2>/dev/null
timeout 120 python3 lab/l2_warm_bound.py --calls 20 submissions/triton_bf16.py > "$OUT/l2_bound.txt" 2>&1; echo "l2 bound: exit $?"
timeout 120 python3 lab/cupti_compare.py submissions/triton_bf16.py --calls 20 --compare "$OUT/bundled.json" \
  > "$OUT/cupti_bf16.txt" 2>&1; echo "cupti: exit $?"
echo "--- census probe"; tail -12 "$OUT/census_probe.txt"
echo "--- one file"; grep "geomean\|wall" "$OUT/one.txt" | head -3
echo "--- bundled"; python3 lab/fence_table.py "$OUT/bundled.json" | grep -v "^ *test"
echo "--- attacks"; python3 lab/fence_table.py "$OUT/attacks.json" | grep -v "^ *test [^1]"
echo "--- throttles_mps log"; grep -i "mps\|control\|percent" "$OUT"/throttles_mps*.log | head -12
echo "--- l2 bound"; tail -12 "$OUT/l2_bound.txt"
echo "--- cupti"; tail -12 "$OUT/cupti_bf16.txt"
