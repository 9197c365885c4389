# Issue 37 on one GPU (~6 min): the GPU-zoo attacks that the parent's memory (the KV formats'
# quantisation temporaries, cached) ran out of memory for or that did not get their turn, beside
# triton_bf16; the honest multi-kernel and CUDA-graph files under --diagnostics with the GPU's
# memory logged, then CUPTI beside each. Outputs packed into r37e.tgz.
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37e.sh
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/r37e; mkdir -p $R
python3 lab/standalone.py $S tests/zoo_gpu/*.py tests/honest/*.py > /dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
wall() { python3 -c "import time;print(round(time.time()-$1,1))"; }
LB="python3 eval.py --mode leaderboard --sandbox require --no-progress"
Z=""; for n in forges_reply forges_timer kills_profiler labels_as_warmup throttles_mps watches_inputs works_after_timer; do
  Z="$Z --submission $S/$n.py"; done
t0=$(date +%s.%N)
timeout 200 $LB --budget 0.15 --timeout 30 --submission submissions/triton_bf16.py $Z --logs $R/z --json $R/z.json > $R/z.txt 2>&1
echo "zoo: exit $? at $(wall $t0) s"
nvidia-smi --query-gpu=memory.used --format=csv,noheader -lms 250 > $R/mem.txt 2>&1 &
MEM=$!
t0=$(date +%s.%N)
timeout 90 $LB --budget 0.2 --diagnostics --submission $S/multi_kernel.py --submission $S/cuda_graph.py \
  --logs $R/h --json $R/h.json > $R/h.txt 2>&1
echo "honest: exit $? at $(wall $t0) s"
kill $MEM
for n in multi_kernel cuda_graph; do
  timeout 40 python3 lab/cupti_compare.py $S/$n.py --calls 8 --compare $R/h.json > $R/cupti_$n.txt 2>&1
  echo "cupti $n: exit $?"
done
tar czf "$OUT/r37e.tgz" -C /tmp r37e 2>/dev/null
grep -E "^[a-z_0-9]+\.py: (pass|FAIL)|^wall" $R/z.txt $R/h.txt | cut -c1-230
sort -n $R/mem.txt | tail -1
for n in multi_kernel cuda_graph; do echo "--- cupti $n"; tail -10 $R/cupti_$n.txt | cut -c1-120; done
