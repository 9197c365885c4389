# Issue 37 on one GPU (~9 min): lab/gpu_issue37h.sh (the wait-cost probe, the fence's null calls and
# multi_kernel against CUPTI), the one-file wall of triton_bf16 at the default budget, then two
# back-to-back fenced leaderboards of the bundled Triton files, writes_into_slot and triton_fp8_plus3 at
# the default budget (run-to-run agreement; issue 41's ties and --compare of the two runs). Outputs
# packed into r37i.tgz (and r37h.tgz, r37f.tgz).
# Usage (device machine, wheels in .whl, carry .whl): [NO_H=1] bash lab/gpu_issue37i.sh (NO_H=1: without 37h)
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/r37i; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ -z "${NO_H:-}" ]; then OUT=$OUT bash lab/gpu_issue37h.sh > $R/h.txt 2>&1; echo "37h: exit $?"; fi
python3 lab/standalone.py $S tests/zoo_gpu/writes_into_slot.py tests/slower/triton_fp8_plus3.py > /dev/null
wall() { python3 -c "import time;print(round(time.time()-$1,1))"; }
LB="python3 eval.py --mode leaderboard --sandbox require --no-progress"
t0=$(date +%s.%N)
timeout -k 10 60 $LB --submission submissions/triton_bf16.py --json $R/one.json > $R/one.txt 2>&1
echo "one-file leaderboard: exit $? at $(wall $t0) s"
for run in 1 2; do
  t0=$(date +%s.%N)
  timeout -k 10 150 $LB --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
    --submission submissions/triton_mxfp4.py --submission $S/writes_into_slot.py --submission $S/triton_fp8_plus3.py \
    --logs $R/b$run --db $R/runs.db --bundle $R/b$run.bundle.json --json $R/b$run.json > $R/b$run.txt 2>&1
  echo "bundled run $run: exit $? at $(wall $t0) s"
done
python3 eval.py --db $R/runs.db --mode history --compare 1 2 > $R/compare.txt 2>&1
tar czf "$OUT/r37i.tgz" -C /tmp r37i 2>/dev/null
[ -f $R/h.txt ] && grep -v "^\[W" $R/h.txt | grep "2p \|two processes\|null steps\|fence cost\|ranked/kernel\|ranked +\|flag" | cut -c1-150
python3 lab/issue37_table.py $R/b1.json $R/b2.json | cut -c1-200
grep -h "^ *=\?[0-9] \|geomean\|tie" $R/b1.txt $R/b2.txt | cut -c1-160 | head -16
grep -c " same" $R/compare.txt; grep -E "faster|slower" $R/compare.txt | cut -c1-160 | head
