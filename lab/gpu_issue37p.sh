# Issue 37/41 in one device call (~6 min, one GPU): does `eval.py --mode benchmark` run now (it printed nothing in
# 60 s on a GPU, three times in a row, while --mode leaderboard ran), then what moves a small case's
# time from process to process.
# 1. --mode benchmark of triton_fp8, fenced, then --no-audit (no fence), then --mode leaderboard, each
#    under `timeout -s ABRT` with Python's faulthandler on: a run still going at its limit prints
#    every thread's stack (the parent's; the worker's log is packed too).
# 2. lab/placement_probe.py on triton_fp8 at 4x1k in three processes with --reload (the submission's
#    own buffers move with each placement), one with --reload --reflush (the flush buffer too) and one
#    with neither.
# 3. lab/ipc_probe.py (can the parent copy a worker's output out of the worker's own memory: the
#    planned fix of the early DONE) plain, with --bwrap and with --expandable, then the same three as
#    clients of an MPS daemon of its own; there too lab/watcher_probe.py (a parent kernel watching DONE
#    with a bound: does it see DONE, and how much sooner than the stream's own wait) at three
#    CUDA_DEVICE_MAX_CONNECTIONS.
# Outputs packed into r37p.tgz. Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37p.sh
source lab/h200_setup.sh
R=/tmp/r37p; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
wall() { python3 -c "import time;print(round(time.time()-$1,1))"; }
run() {  # name, then eval.py's flags
  local name=$1; shift; local t0=$(date +%s.%N)
  timeout -s ABRT -k 5 45 python3 -X faulthandler eval.py --sandbox require --no-progress --budget 0.3 \
    --logs $R/l_$name --db $R/$name.db --submission submissions/triton_fp8.py "$@" > $R/$name.txt 2>&1
  echo "$name: exit $? at $(wall $t0) s"
  grep -h "^triton_fp8.py: \|^wall" $R/$name.txt | cut -c1-160
  grep -E "^(Thread|Current thread)|^  File" $R/$name.txt | grep -v "threading.py" | head -30 | cut -c1-160
}
run benchmark --mode benchmark
run benchmark_plain --mode benchmark --no-audit
run leaderboard --mode leaderboard
for proc in 1 2 3; do
  timeout -k 5 40 python3 lab/placement_probe.py submissions/triton_fp8.py --reload --rounds 2 --calls 30 \
    > $R/place_reload_$proc.txt 2>&1
  echo "placement --reload, process $proc: exit $?"; tail -1 $R/place_reload_$proc.txt | cut -c1-200
done
timeout -k 5 40 python3 lab/placement_probe.py submissions/triton_fp8.py --reload --reflush --rounds 2 --calls 30 \
  > $R/place_reflush.txt 2>&1
echo "placement --reload --reflush, process 4: exit $?"; tail -1 $R/place_reflush.txt | cut -c1-200
timeout -k 5 40 python3 lab/placement_probe.py submissions/triton_fp8.py --rounds 2 --calls 30 > $R/place_5.txt 2>&1
echo "placement, process 5: exit $?"; tail -1 $R/place_5.txt | cut -c1-200
ipc() { for flags in "" --bwrap --expandable; do
  timeout -k 5 60 python3 lab/ipc_probe.py $flags > "$R/ipc_$1${flags// /}.txt" 2>&1
  echo "ipc_probe $1 $flags: exit $?"; tail -1 "$R/ipc_$1${flags// /}.txt" | cut -c1-220
done; }
ipc plain
if start_mps $R; then
  ipc mps
  for conn in default 1 32; do  # (a bounded watcher of DONE: does it hang, how much sooner does it see DONE)
    if [ $conn = default ]; then unset CUDA_DEVICE_MAX_CONNECTIONS; else export CUDA_DEVICE_MAX_CONNECTIONS=$conn; fi
    timeout -k 5 60 python3 lab/watcher_probe.py --calls 100 > $R/watcher_$conn.txt 2>&1
    echo "watcher_probe, connections $conn: exit $?"; tail -1 $R/watcher_$conn.txt | cut -c1-220
  done
  unset CUDA_DEVICE_MAX_CONNECTIONS
else
  echo "no MPS daemon: the probes that need one were not run"
fi
stop_mps
tar czf "$OUT/r37p.tgz" -C /tmp r37p 2>/dev/null
