# Issues 37 and 38 on the H200, one pass within ~9 minutes: the allow-list sandbox with CUDA and
# Triton inside it (tools/allowlist_gpu_probe.py, tests/test_allowlist.py); the one-file leaderboard's
# wall; the bundled Triton files and the honest multi-kernel and CUDA-graph files under
# tools/fence_ab.py (the census's times against fence.CENSUS_MAX_S, the hand-over-only null calls);
# the census-holding attacks (the worker that keeps its kernels on the SMs last: ending it may end
# the harness's GPU context); issue 38's zoo attacks; CUPTI beside the bundled bf16 run. Test files
# are made standalone first (tools/standalone.py: the sandbox shows a worker only its own file).
# Usage (device machine, wheels in .whl): bash tools/h200_issue37c.sh
source tools/h200_setup.sh
S=/tmp/standalone
python3 tools/standalone.py $S tests/zoo_gpu/holds_sms_at_census.py tests/zoo_gpu/resident_at_gate.py \
  tests/honest/multi_kernel.py tests/honest/cuda_graph.py
timeout 40 python3 tools/allowlist_gpu_probe.py > "$OUT/allowlist_probe.txt" 2>&1; echo "allowlist probe: exit $?"
timeout 40 python3 -m pytest -q -p no:cacheprovider tests/test_allowlist.py > "$OUT/allowlist_test.txt" 2>&1
echo "allowlist test: exit $?"
start=$(date +%s.%N)
timeout 60 python3 eval.py --mode leaderboard --sandbox require --no-progress --submission submissions/triton_bf16.py \
  --logs /tmp/l1 --json "$OUT/one.json" > "$OUT/one.txt" 2>&1
code=$?
echo "one file (triton_bf16, default budget): exit $code wall $(python3 -c "import time;print(round(time.time()-$start,1))") s"
if [ $code -ne 0 ]; then tail -30 "$OUT/one.txt"; cat /tmp/l1/*.log 2>/dev/null | tail -30; tail -20 "$OUT/allowlist_probe.txt"; exit 1; fi
AB="python3 tools/fence_ab.py --census mid -- --mode leaderboard --sandbox require --no-progress"
timeout 200 $AB --budget 0.5 --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
  --submission submissions/triton_mxfp4.py --submission $S/multi_kernel.py --submission $S/cuda_graph.py \
  --logs /tmp/l2 --json "$OUT/honest.json" > "$OUT/honest.txt" 2>&1; echo "honest: exit $?"
timeout 90 $AB --budget 0.5 --timeout 30 --submission $S/holds_sms_at_census.py --submission submissions/triton_fp8.py \
  --submission $S/resident_at_gate.py --logs /tmp/l3 --json "$OUT/attacks.json" > "$OUT/attacks.txt" 2>&1
echo "attacks: exit $?"
echo "env.canary $(date +%s)" > .env
timeout 60 python3 eval.py --mode leaderboard --budget 0.3 --no-progress --sandbox require --db /tmp/al/a.db \
  --logs /tmp/al/logs --submission tests/zoo_os/reads_other_runs.py --submission tests/zoo_os/exfiltrates_dotenv.py \
  --submission tests/zoo_os/encodes_in_timings.py --submission tests/zoo_os/locks_databases.py \
  --submission submissions/triton_fp8.py --json "$OUT/os_attacks.json" > "$OUT/os_attacks.txt" 2>&1
echo "os attacks: exit $?"; rm -f .env
timeout 60 python3 tools/cupti_compare.py submissions/triton_bf16.py --calls 10 --compare "$OUT/honest.json" \
  > "$OUT/cupti_bf16.txt" 2>&1; echo "cupti: exit $?"
echo "--- allowlist"; tail -3 "$OUT/allowlist_probe.txt"; tail -3 "$OUT/allowlist_test.txt"
echo "--- one file"; grep "wall" "$OUT/one.txt" | tail -1
echo "--- honest"; grep "fence_ab\|wall" "$OUT/honest.txt" | cut -c1-250; python3 tools/fence_table.py "$OUT/honest.json" | grep -v "^ *test"
echo "--- attacks"; grep "fence_ab\|wall" "$OUT/attacks.txt" | cut -c1-250; python3 tools/fence_table.py "$OUT/attacks.json" | grep -v "^ *test [^1]" | cut -c1-250
echo "--- os attacks"; grep -c "env.canary" "$OUT/os_attacks.txt" "$OUT/os_attacks.json"; grep -h "read .* bytes\|locked:" /tmp/al/logs/*.log | head -4
python3 tools/fence_table.py "$OUT/os_attacks.json" | grep -v "^ *test [^1]" | cut -c1-200
echo "--- cupti"; tail -12 "$OUT/cupti_bf16.txt"
