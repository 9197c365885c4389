# Issue 37, acceptances 3 and 4 on HEAD (~5 min, one GPU): a fenced leaderboard of the bundled Triton
# files at the default budget with CUPTI beside each (lab/cupti_compare.py, every case); torch_loop
# fenced over seeds 1-3 and once with --no-audit (its walls). The zoo: lab/gpu_issue37l.sh.
# Outputs packed into r37k.tgz. Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37k.sh
source lab/h200_setup.sh
R=/tmp/r37k; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
wall() { python3 -c "import time;print(round(time.time()-$1,1))"; }
LB="python3 eval.py --mode leaderboard --sandbox require --no-progress"
t0=$(date +%s.%N)
timeout -k 10 120 $LB --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
  --submission submissions/triton_mxfp4.py --json $R/bundled.json > $R/bundled.txt 2>&1
echo "bundled: exit $? at $(wall $t0) s"
for f in triton_bf16 triton_fp8 triton_mxfp4; do
  timeout -k 10 60 python3 lab/cupti_compare.py submissions/$f.py --calls 10 --compare $R/bundled.json > $R/cupti_$f.txt 2>&1
  echo "cupti $f: exit $?"
done
t0=$(date +%s.%N)
timeout -k 10 60 python3 eval.py --mode leaderboard --no-audit --sandbox require --no-progress --budget 0.2 \
  --submission submissions/torch_loop.py --json $R/loop_plain.json > $R/loop_plain.txt 2>&1
echo "torch_loop --no-audit: exit $? wall $(wall $t0) s"
for seed in 1 2 3; do
  t0=$(date +%s.%N)
  timeout -k 10 60 $LB --budget 0.2 --seed $seed --submission submissions/torch_loop.py --json $R/loop_$seed.json \
    > $R/loop_$seed.txt 2>&1
  echo "torch_loop fenced seed $seed: exit $? wall $(wall $t0) s"
done
tar czf "$OUT/r37k.tgz" -C /tmp r37k 2>/dev/null
for f in triton_bf16 triton_fp8 triton_mxfp4; do echo "--- cupti $f"; tail -11 $R/cupti_$f.txt | cut -c1-120; done
grep -h "^torch_loop.py: \|^wall" $R/loop_*.txt | cut -c1-160
