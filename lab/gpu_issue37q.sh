# Issue 37, acceptance 4 (~5 min, one GPU): what the ranked number holds above an independent trace at
# the small cases. A fenced leaderboard of the three bundled Triton files, then lab/cupti_compare.py of
# each against it twice: in a lone process (as lab/gpu_issue37k.sh), and with the process a client of
# an MPS daemon of its own, as the fenced worker is (MPS added ~1 µs at 4x1k to triton_bf16's span
# on the H100, BENCHMARKS.md). Outputs packed into r37q.tgz.
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37q.sh
source lab/h200_setup.sh
R=/tmp/r37q; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout -k 10 120 python3 eval.py --mode leaderboard --sandbox require --no-progress --submission submissions/triton_bf16.py \
  --submission submissions/triton_fp8.py --submission submissions/triton_mxfp4.py --json $R/bundled.json > $R/bundled.txt 2>&1
echo "bundled: exit $?"
cupti() { for f in triton_bf16 triton_fp8 triton_mxfp4; do
  timeout -k 10 60 python3 lab/cupti_compare.py submissions/$f.py --calls 10 --compare $R/bundled.json > $R/cupti_${f}_$1.txt 2>&1
  echo "cupti $f $1: exit $?"
done; }
cupti plain
start_mps $R && cupti mps
stop_mps
tar czf "$OUT/r37q.tgz" -C /tmp r37q 2>/dev/null
for f in $R/cupti_*.txt; do echo "--- $(basename $f .txt)"; grep -E "^ +[0-9]+×" $f | cut -c1-110; done
