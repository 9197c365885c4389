# Issue 37, acceptance 2 (no false rejection) on one GPU: fenced leaderboards of the honest files over
# seeds, each run's verdicts kept. SEEDS (default "1 2 3") and BUDGET (default 0.05 s per case: pass or
# fail is what this checks; the ranked numbers' accuracy is lab/gpu_issue37i.sh's) from the environment;
# torch_loop only with LOOP=1. Outputs packed into r37j.tgz.
# Usage (device machine, wheels in .whl, carry .whl): SEEDS="1 2 3" bash lab/gpu_issue37j.sh
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/r37j; mkdir -p $R
python3 lab/standalone.py $S tests/honest/*.py > /dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
wall() { python3 -c "import time;print(round(time.time()-$1,1))"; }
FILES="--submission submissions/triton_bf16.py --submission submissions/triton_fp8.py --submission submissions/triton_mxfp4.py"
FILES="$FILES --submission submissions/torch_batched.py --submission $S/multi_kernel.py --submission $S/cuda_graph.py"
[ -n "${LOOP:-}" ] && FILES="$FILES --submission submissions/torch_loop.py"
for seed in ${SEEDS:-1 2 3}; do
  t0=$(date +%s.%N)
  timeout -k 10 280 python3 eval.py --mode leaderboard --sandbox require --no-progress --budget ${BUDGET:-0.05} --seed $seed \
    $FILES --json $R/s$seed.json > $R/s$seed.txt 2>&1
  echo "seed $seed: exit $? at $(wall $t0) s"
  grep -E "^[a-z_0-9]+\.py: (pass|FAIL)|rejected|FAIL" $R/s$seed.txt | cut -c1-200 | head -12
done
tar czf "$OUT/r37j.tgz" -C /tmp r37j 2>/dev/null
