# Issue 37 in one device call (~7 min, one GPU): the early-DONE attack (tests/zoo_gpu/signals_done_early.py)
# beside triton_bf16 with the parent waiting for DONE by the front end's wait ("stream") and by the
# watcher kernel ("watcher", harness/parent/watcher.py), fence costs and ranks side by side; then
# lab/placement_probe.py (triton_fp8 and triton_mxfp4 at 4x1k, two processes each); then
# NO_H=1 lab/gpu_issue37i.sh (one-file wall, two back-to-back runs, issue 41's ties and --compare) with
# the watcher, or with "stream" where the watcher's run was not verified. Outputs: r37n.tgz, r37i.tgz.
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37n.sh
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/r37n; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 lab/standalone.py $S tests/zoo_gpu/signals_done_early.py > /dev/null
for mode in watcher stream; do
  timeout 120 python3 lab/eval_done_by.py $mode --mode leaderboard --sandbox require --no-progress --budget 0.2 --submission submissions/triton_bf16.py \
    --submission $S/signals_done_early.py \
    --json $R/$mode.json --logs $R/logs_$mode > $R/$mode.txt 2>&1
  echo "done_by=$mode: exit $?"
  grep -h "^[a-z_0-9]*\.py: \|verified\|UNVERIFIED\|not fenced" $R/$mode.txt | cut -c1-180 | head -8
done
python3 lab/issue37_table.py $R/stream.json $R/watcher.json | cut -c1-200
for f in triton_fp8 triton_mxfp4; do
  for proc in 1 2; do
    timeout 60 python3 lab/placement_probe.py submissions/$f.py > $R/place_${f}_$proc.txt 2>&1
    echo "placement $f process $proc: exit $?"; tail -1 $R/place_${f}_$proc.txt | cut -c1-200
  done
done
tar czf "$OUT/r37n.tgz" -C /tmp r37n 2>/dev/null
if ! grep -q "verified: the parent's clock" $R/watcher.txt; then
  echo "the watcher's run was not verified: 37i with done_by = stream"; MODE=stream
fi
NO_H=1 EVAL="python3 lab/eval_done_by.py ${MODE:-watcher}" bash lab/gpu_issue37i.sh 2>&1 | tail -45
