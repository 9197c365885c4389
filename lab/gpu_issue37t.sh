# Issue 37 on one GPU, short (~3 min): lab/gpu_issue37s.sh with two files, triton_bf16 and
# signals_done_early, fenced with the DONE watcher on and off; the watcher check; the IPC probes.
# Outputs packed into r37t.tgz. Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37t.sh
source lab/h200_setup.sh
R=/tmp/r37t S=/tmp/standalone; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout -k 5 60 python3 lab/watcher_check.py > $R/check.txt 2>&1; echo "watcher_check: exit $?"; tail -3 $R/check.txt
python3 lab/standalone.py $S tests/zoo_gpu/signals_done_early.py > /dev/null
for watch in on off; do
  timeout -k 10 100 python3 lab/fence_ab.py --watch $watch -- --mode leaderboard --sandbox require --no-progress \
    --budget 0.3 --submission submissions/triton_bf16.py --submission $S/signals_done_early.py \
    --json $R/lb_$watch.json > $R/lb_$watch.txt 2>&1
  echo "leaderboard, watcher $watch: exit $?"
  grep -hE "^[a-z_0-9]+\.py: (pass|FAIL)|fence cost" $R/lb_$watch.txt | cut -c1-200 | head -6
done
ipc() { for flags in "" --bwrap; do
  timeout -k 5 40 python3 lab/ipc_probe.py $flags > "$R/ipc_$1${flags// /}.txt" 2>&1
  echo "ipc_probe $1 $flags: exit $?"; tail -1 "$R/ipc_$1${flags// /}.txt" | cut -c1-220
done; }
ipc plain
start_mps $R/mps && ipc mps
stop_mps
tar czf "$OUT/r37t.tgz" -C /tmp r37t 2>/dev/null
