# Issue 37, second pass: the fence's attack files in order (a GPU fault ends the harness's context:
# the rest of the run goes on in fresh evaluators), the bundled files again (run-to-run), the L2-warm
# bound. Usage (device machine, wheels in .whl): bash lab/h200_issue37b.sh
source lab/h200_setup.sh
Z=tests/zoo_gpu
LB="python3 eval.py --mode leaderboard --sandbox require --no-progress"
start=$(date +%s)
timeout 400 $LB --budget 1 --timeout 30 --submission $Z/resident_at_gate.py --submission $Z/preloads_kv.py \
  --submission $Z/prefetches_l2.py --submission $Z/rewrites_done.py --submission $Z/throttles_mps.py \
  --submission submissions/triton_bf16.py --submission $Z/illegal_address.py --submission submissions/triton_fp8.py \
  --logs /tmp/l3 --json "$OUT/attacks.json" > "$OUT/attacks.txt" 2>&1; echo "attacks: exit $? in $(( $(date +%s) - start )) s"
grep -h "pipe\|control\|percentage\|reach\|server" /tmp/l3/throttles_mps*.log 2>/dev/null | head -12 > "$OUT/throttles_log.txt"
timeout 200 $LB --budget 1 --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
  --submission submissions/triton_mxfp4.py --logs /tmp/l2 --json "$OUT/bundled.json" > "$OUT/bundled.txt" 2>&1; echo "bundled: exit $?"
timeout 100 python3 lab/l2_warm_bound.py --calls 20 submissions/triton_bf16.py > "$OUT/l2_bound.txt" 2>&1; echo "l2 bound: exit $?"
echo "--- attacks"; grep "warning\|wall" "$OUT/attacks.txt"; python3 lab/fence_table.py "$OUT/attacks.json" | grep -v "^ *test [^1]" | cut -c1-230
echo "--- throttles_mps log"; cat "$OUT/throttles_log.txt"
echo "--- bundled"; python3 lab/fence_table.py "$OUT/bundled.json" | grep -v "^ *test"
echo "--- l2 bound"; tail -11 "$OUT/l2_bound.txt"
