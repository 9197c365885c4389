# Issue 38 on the H200 in ~4 minutes: the allow-list sandbox with CUDA and Triton inside it
# (lab/allowlist_gpu_probe.py, tests/test_allowlist.py), the one-file bundled leaderboard's wall,
# and the zoo's read / lock / exfiltrate attacks beside triton_fp8 in a fenced leaderboard.
# Usage (device machine, wheels in .whl): bash lab/h200_issue38.sh
source lab/h200_setup.sh
timeout 40 python3 lab/allowlist_gpu_probe.py > "$OUT/allowlist_probe.txt" 2>&1; echo "allowlist probe: exit $?"
timeout 40 python3 -m pytest -q -p no:cacheprovider tests/test_allowlist.py > "$OUT/allowlist_test.txt" 2>&1
echo "allowlist test: exit $?"
start=$(date +%s.%N)
timeout 60 python3 eval.py --mode leaderboard --sandbox require --no-progress --submission submissions/triton_bf16.py \
  --logs /tmp/l1 --json "$OUT/one.json" > "$OUT/one.txt" 2>&1
echo "one file (triton_bf16, default budget): exit $? wall $(python3 -c "import time;print(round(time.time()-$start,1))") s"
echo "env.canary $(date +%s)" > .env
timeout 70 python3 eval.py --mode leaderboard --budget 0.3 --no-progress --sandbox require --db /tmp/al/a.db \
  --logs /tmp/al/logs --submission tests/zoo_os/reads_other_runs.py --submission tests/zoo_os/exfiltrates_dotenv.py \
  --submission tests/zoo_os/encodes_in_timings.py --submission tests/zoo_os/locks_databases.py \
  --submission submissions/triton_fp8.py --json "$OUT/os_attacks.json" > "$OUT/os_attacks.txt" 2>&1
echo "os attacks: exit $?"; rm -f .env
echo "--- allowlist"; tail -4 "$OUT/allowlist_probe.txt"; tail -3 "$OUT/allowlist_test.txt"
echo "--- one file"; grep "geomean\|wall" "$OUT/one.txt" | tail -3; tail -8 "$OUT/one.txt" | cut -c1-160
echo "--- os attacks"; grep -h "read .* bytes\|locked:" /tmp/al/logs/*.log | head -4
python3 lab/fence_table.py "$OUT/os_attacks.json" | grep -v "^ *test [^1]" | cut -c1-200
