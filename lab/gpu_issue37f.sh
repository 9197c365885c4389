# Issue 37, the per-kernel excess of many-kernel calls under the fence (~6 min, one GPU): null calls
# with one kernel and with fifty (lab/fence_ab.py --null-steps) beside the honest multi-kernel file,
# then CUPTI beside it as an MPS client and not. Outputs packed into r37f.tgz.
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37f.sh
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/r37f; mkdir -p $R
python3 lab/standalone.py $S tests/honest/multi_kernel.py > /dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout -k 10 200 python3 lab/fence_ab.py --null-steps -- --mode leaderboard --sandbox require --no-progress --budget 0.3 \
  --submission $S/multi_kernel.py --submission submissions/triton_bf16.py --logs $R/l --json $R/lb.json > $R/lb.txt 2>&1
echo "leaderboard: exit $?"
timeout -k 10 60 python3 lab/cupti_compare.py $S/multi_kernel.py --calls 8 --case 0 --case 2 --compare $R/lb.json > $R/cupti.txt 2>&1
echo "cupti: exit $?"
tar czf "$OUT/r37f.tgz" -C /tmp r37f 2>/dev/null
grep "null steps\|fence cost" $R/lb.txt | head -14
python3 lab/fence_table.py $R/lb.json | grep -v "^ *test" | cut -c1-160
tail -6 $R/cupti.txt
