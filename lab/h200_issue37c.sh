# Issues 37 and 38 on the H200, one pass within ~9 minutes: lab/h200_issue38.sh (the allow-list
# sandbox with CUDA and Triton inside it, the one-file wall, issue 38's zoo attacks); the bundled
# Triton files and the honest multi-kernel and CUDA-graph files under lab/fence_ab.py (the census's
# times against fence.CENSUS_MAX_S, the hand-over-only null calls); the census-holding attacks (the
# worker that keeps its kernels on the SMs last: ending it may end the harness's GPU context); CUPTI
# beside the bundled bf16 run. Test files are made standalone first (lab/standalone.py: the
# sandbox shows a worker only its own file).
# Usage (device machine, wheels in .whl): bash lab/h200_issue37c.sh
source lab/h200_setup.sh
S=/tmp/standalone
python3 lab/standalone.py $S tests/zoo_gpu/holds_sms_at_census.py tests/zoo_gpu/resident_at_gate.py \
  tests/honest/multi_kernel.py tests/honest/cuda_graph.py
bash lab/h200_issue38.sh  # the allow-list sandbox, the one-file wall, the read / lock / exfiltrate attacks
AB="python3 lab/fence_ab.py --census mid -- --mode leaderboard --sandbox require --no-progress"
timeout 200 $AB --budget 0.5 --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
  --submission submissions/triton_mxfp4.py --submission $S/multi_kernel.py --submission $S/cuda_graph.py \
  --logs /tmp/l2 --json "$OUT/honest.json" > "$OUT/honest.txt" 2>&1; echo "honest: exit $?"
timeout 90 $AB --budget 0.5 --timeout 30 --submission $S/holds_sms_at_census.py --submission submissions/triton_fp8.py \
  --submission $S/resident_at_gate.py --logs /tmp/l3 --json "$OUT/attacks.json" > "$OUT/attacks.txt" 2>&1
echo "attacks: exit $?"
timeout 60 python3 lab/cupti_compare.py submissions/triton_bf16.py --calls 10 --compare "$OUT/honest.json" \
  > "$OUT/cupti_bf16.txt" 2>&1; echo "cupti: exit $?"
echo "--- honest"; grep "fence_ab\|wall" "$OUT/honest.txt" | cut -c1-250; python3 lab/fence_table.py "$OUT/honest.json" | grep -v "^ *test"
echo "--- attacks"; grep "fence_ab\|wall" "$OUT/attacks.txt" | cut -c1-250; python3 lab/fence_table.py "$OUT/attacks.json" | grep -v "^ *test [^1]" | cut -c1-250
echo "--- cupti"; tail -12 "$OUT/cupti_bf16.txt"
