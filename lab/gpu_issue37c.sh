# Issue 37, third pass on one GPU (~4 min): the fence calibrated with a kernel in its null calls and
# no worker events inside a fenced call: the bundled Triton files and writes_into_slot ranked, CUPTI
# beside bf16 and mxfp4; the honest multi-kernel file alone without --diagnostics, the GPU's memory
# per process logged; the one-file wall. Outputs packed into r37c.tgz.
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37c.sh
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/r37c; mkdir -p $R
python3 lab/standalone.py $S tests/honest/multi_kernel.py tests/zoo_gpu/writes_into_slot.py
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
wall() { python3 -c "import time;print(round(time.time()-$1,1))"; }
t0=$(date +%s.%N)
timeout 60 python3 eval.py --mode leaderboard --sandbox require --no-progress --submission submissions/triton_bf16.py \
  --logs $R/l1 --json $R/one.json > $R/one.txt 2>&1
echo "one file (triton_bf16, default budget): exit $? wall $(wall $t0) s"
t0=$(date +%s.%N)
timeout 150 python3 lab/fence_ab.py -- --mode leaderboard --sandbox require --no-progress --budget 0.3 \
  --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py --submission submissions/triton_mxfp4.py \
  --submission $S/writes_into_slot.py --logs $R/l2 --json $R/lb.json > $R/lb.txt 2>&1
echo "leaderboard: exit $? at $(wall $t0) s"
( while true; do nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader | tr '\n' ';'; echo; sleep 0.3; done ) > $R/apps.txt 2>&1 &
MEM=$!
t0=$(date +%s.%N)
timeout 120 python3 eval.py --mode leaderboard --sandbox require --no-progress --budget 0.3 \
  --submission $S/multi_kernel.py --logs $R/l3 --json $R/mk.json > $R/mk.txt 2>&1
echo "multi_kernel: exit $? at $(wall $t0) s"
kill $MEM
for f in triton_bf16 triton_mxfp4; do
  timeout 60 python3 lab/cupti_compare.py submissions/$f.py --calls 10 --compare $R/lb.json > $R/cupti_$f.txt 2>&1
  echo "cupti $f: exit $?"
done
tar czf "$OUT/r37c.tgz" -C /tmp r37c 2>/dev/null
echo "--- one file"; grep "wall" $R/one.txt | tail -1 | cut -c1-200
echo "--- leaderboard"; grep "fence cost\|wall" $R/lb.txt | cut -c1-200
python3 lab/fence_table.py $R/lb.json | grep -v "^ *test" | cut -c1-130
echo "--- multi_kernel"; grep "FAIL\|: pass\|wall" $R/mk.txt | cut -c1-300; sort -t, -k3 -n $R/apps.txt | tail -2 | cut -c1-400
for f in triton_bf16 triton_mxfp4; do echo "--- cupti $f"; tail -10 $R/cupti_$f.txt; done
