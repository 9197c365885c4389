# Issue 37, second pass on one GPU (~4 min): where the fence's cost goes (null calls doing each of a
# fenced call's own steps, lab/fence_ab.py --null-steps) beside triton_bf16 and writes_into_slot;
# the honest multi-kernel file alone under --diagnostics with the GPU's memory logged (an earlier run
# ran out of memory there); the one-file wall; CUPTI beside bf16. Outputs packed into r37b.tgz.
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37b.sh
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/r37b; mkdir -p $R
python3 lab/standalone.py $S tests/honest/multi_kernel.py tests/zoo_gpu/writes_into_slot.py
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
wall() { python3 -c "import time;print(round(time.time()-$1,1))"; }
t0=$(date +%s.%N)
timeout 60 python3 eval.py --mode leaderboard --sandbox require --no-progress --submission submissions/triton_bf16.py \
  --logs $R/l1 --json $R/one.json > $R/one.txt 2>&1
echo "one file (triton_bf16, default budget): exit $? wall $(wall $t0) s"
t0=$(date +%s.%N)
timeout 150 python3 lab/fence_ab.py --null-steps -- --mode leaderboard --sandbox require --no-progress --budget 0.3 \
  --submission submissions/triton_bf16.py --submission $S/writes_into_slot.py --logs $R/l2 --json $R/steps.json > $R/steps.txt 2>&1
echo "null steps: exit $? at $(wall $t0) s"
nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader -lms 250 > $R/mem.txt 2>&1 &
MEM=$!
t0=$(date +%s.%N)
timeout 120 python3 eval.py --mode leaderboard --sandbox require --no-progress --budget 0.3 --diagnostics \
  --submission $S/multi_kernel.py --logs $R/l3 --json $R/mk.json > $R/mk.txt 2>&1
echo "multi_kernel --diagnostics: exit $? at $(wall $t0) s"
kill $MEM
timeout 45 python3 lab/cupti_compare.py submissions/triton_bf16.py --calls 10 --compare $R/steps.json > $R/cupti.txt 2>&1
echo "cupti: exit $?"
tar czf "$OUT/r37b.tgz" -C /tmp r37b 2>/dev/null
echo "--- one file"; grep "wall" $R/one.txt | tail -2 | cut -c1-200
echo "--- null steps"; grep "fence_ab\] null steps\|fence cost" $R/steps.txt | head -24
python3 lab/fence_table.py $R/steps.json | grep -v "^ *test" | cut -c1-160
echo "--- multi_kernel"; grep "FAIL\|pass\|wall" $R/mk.txt | cut -c1-300
sort -n $R/mem.txt | tail -1; head -1 $R/mem.txt
echo "--- cupti"; tail -10 $R/cupti.txt
