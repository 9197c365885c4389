# Issue 37 in a short device call (~2 min, one GPU): the one-file wall of triton_bf16 at the default
# budget; the early-DONE attack (tests/zoo_gpu/signals_done_early.py) beside triton_bf16 (how much of
# the subtracted wake-up an early DONE wins); lab/placement_probe.py on triton_fp8 at 4x1k in two
# processes. Outputs packed into r37o.tgz.
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37o.sh
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/r37o; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 lab/standalone.py $S tests/zoo_gpu/signals_done_early.py > /dev/null
wall() { python3 -c "import time;print(round(time.time()-$1,1))"; }
LB="python3 eval.py --mode leaderboard --sandbox require --no-progress"
t0=$(date +%s.%N)
timeout -k 5 45 $LB --submission submissions/triton_bf16.py --json $R/one.json > $R/one.txt 2>&1
echo "one-file leaderboard: exit $? at $(wall $t0) s"; grep -h "^wall\|^triton_bf16.py: " $R/one.txt | cut -c1-200
timeout -k 5 60 $LB --budget 0.2 --submission submissions/triton_bf16.py --submission $S/signals_done_early.py \
  --json $R/early.json > $R/early.txt 2>&1
echo "early DONE: exit $?"
python3 -c "
import json
rows = [r for r in json.load(open('$R/early.json'))['rows'] if r.get('kind') == 'benchmark']
by = {}
for r in rows: by.setdefault(r['case'], {})[r['submission']] = (r.get('status'), r.get('median_us'), r.get('fence_us'))
for case, v in by.items(): print(case, v)
" 2>&1 | head -10
grep -h "^signals_done_early.py: \|FAIL\|signal" $R/early.txt | cut -c1-200 | head -5
for proc in 1 2; do
  timeout -k 5 30 python3 lab/placement_probe.py submissions/triton_fp8.py --rounds 2 --calls 30 > $R/place_$proc.txt 2>&1
  echo "placement triton_fp8 process $proc: exit $?"; cut -c1-150 $R/place_$proc.txt | tail -13
done
tar czf "$OUT/r37o.tgz" -C /tmp r37o 2>/dev/null
