# Issue 37, third pass: the census's placement limit (CENSUS_MAX_S) and the hand-over-only null call.
# The bundled and honest files under tools/fence_ab.py (census times, fence cost), CUPTI beside the
# bundled bf16 run, then the census-holding attacks (the worker that keeps its kernels on the SMs
# last: ending it may end the harness's GPU context). Test files are made standalone first
# (tools/standalone.py: the sandbox shows a worker its own file only).
# Usage (device machine, wheels in .whl): bash tools/h200_issue37c.sh
source tools/h200_setup.sh
S=/tmp/standalone
python3 tools/standalone.py $S tests/zoo_gpu/holds_sms_at_census.py tests/zoo_gpu/resident_at_gate.py \
  tests/honest/multi_kernel.py tests/honest/cuda_graph.py
timeout 60 python3 tools/allowlist_gpu_probe.py > "$OUT/allowlist_probe.txt" 2>&1; echo "allowlist probe: exit $?"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_allowlist.py > "$OUT/allowlist_test.txt" 2>&1
echo "allowlist test: exit $?"
AB="python3 tools/fence_ab.py --census mid -- --mode leaderboard --sandbox require --no-progress"
start=$(date +%s.%N)
timeout 120 python3 eval.py --mode leaderboard --sandbox require --no-progress --submission submissions/triton_bf16.py \
  --logs /tmp/l1 --json "$OUT/one.json" > "$OUT/one.txt" 2>&1
code=$?
echo "one file (triton_bf16, default budget): exit $code wall $(python3 -c "import time;print(round(time.time()-$start,1))") s"
if [ $code -ne 0 ]; then tail -30 "$OUT/one.txt"; cat /tmp/l1/*.log 2>/dev/null | tail -30; exit 1; fi
timeout 330 $AB --budget 1 --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
  --submission submissions/triton_mxfp4.py --submission submissions/torch_batched.py \
  --submission $S/multi_kernel.py --submission $S/cuda_graph.py \
  --logs /tmp/l2 --json "$OUT/honest.json" > "$OUT/honest.txt" 2>&1; echo "honest: exit $?"
timeout 100 python3 tools/cupti_compare.py submissions/triton_bf16.py --calls 20 --compare "$OUT/honest.json" \
  > "$OUT/cupti_bf16.txt" 2>&1; echo "cupti: exit $?"
timeout 120 $AB --budget 1 --timeout 30 --submission $S/holds_sms_at_census.py --submission submissions/triton_fp8.py \
  --submission $S/resident_at_gate.py --logs /tmp/l3 --json "$OUT/attacks.json" > "$OUT/attacks.txt" 2>&1
echo "attacks: exit $?"
echo "env.canary $(date +%s)" > .env
timeout 120 python3 eval.py --mode leaderboard --budget 0.3 --no-progress --sandbox require --db /tmp/al/a.db \
  --logs /tmp/al/logs --submission tests/zoo_os/reads_other_runs.py --submission tests/zoo_os/exfiltrates_dotenv.py \
  --submission tests/zoo_os/encodes_in_timings.py --submission tests/zoo_os/locks_databases.py \
  --submission submissions/triton_fp8.py --json "$OUT/os_attacks.json" > "$OUT/os_attacks.txt" 2>&1
echo "os attacks: exit $?"; rm -f .env
echo "--- allowlist"; tail -3 "$OUT/allowlist_probe.txt"; tail -3 "$OUT/allowlist_test.txt"
echo "--- os attacks"; grep -c canary "$OUT/os_attacks.txt" "$OUT/os_attacks.json"; grep -h "read .* bytes\|locked:" /tmp/al/logs/*.log | head -4
python3 tools/fence_table.py "$OUT/os_attacks.json" | grep -v "^ *test [^1]" | cut -c1-200
echo "--- one file"; grep "wall" "$OUT/one.txt" | tail -1
echo "--- honest"; grep "fence_ab\|wall" "$OUT/honest.txt" | cut -c1-250; python3 tools/fence_table.py "$OUT/honest.json" | grep -v "^ *test"
echo "--- cupti"; tail -12 "$OUT/cupti_bf16.txt"
echo "--- attacks"; grep "fence_ab\|wall" "$OUT/attacks.txt" | cut -c1-250; python3 tools/fence_table.py "$OUT/attacks.json" | grep -v "^ *test [^1]" | cut -c1-250
