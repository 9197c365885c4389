# Issue 37 on one GPU (~6 min): the fence's DONE watcher (harness/parent/watcher.py) and whether
# `--mode benchmark` runs.
# 1. lab/watcher_check.py: the kernel against its Python twin, honest and early orders in one process;
#    then the same as a client of an MPS daemon of its own.
# 2. --mode benchmark of triton_fp8, fenced, under `timeout -s ABRT` with faulthandler (it printed
#    nothing in 60 s on GPUs before the fence pre-launched its kernels).
# 3. A fenced leaderboard of the three bundled Triton files beside signals_done_early (must fail "early
#    end") and writes_into_slot, then the same with the watcher off (lab/fence_ab.py --watch off): what
#    the watcher costs honest files.
# 4. lab/watcher_probe.py under MPS (a bounded watcher beside the worker's stand-in, at three
#    CUDA_DEVICE_MAX_CONNECTIONS) and lab/ipc_probe.py plain and across bwrap's namespaces.
# Outputs packed into r37r.tgz. Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37r.sh
source lab/h200_setup.sh
R=/tmp/r37r S=/tmp/standalone; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
wall() { python3 -c "import time;print(round(time.time()-$1,1))"; }
timeout -k 5 60 python3 lab/watcher_check.py > $R/check_plain.txt 2>&1; echo "watcher_check: exit $?"; tail -4 $R/check_plain.txt
if start_mps $R/mps1; then
  timeout -k 5 60 python3 lab/watcher_check.py > $R/check_mps.txt 2>&1; echo "watcher_check under MPS: exit $?"
  tail -4 $R/check_mps.txt
fi
stop_mps
t0=$(date +%s.%N)
timeout -s ABRT -k 5 45 python3 -X faulthandler eval.py --mode benchmark --sandbox require --no-progress --budget 0.3 \
  --logs $R/l_bench --db $R/bench.db --submission submissions/triton_fp8.py > $R/bench.txt 2>&1
echo "benchmark: exit $? at $(wall $t0) s"; grep -h "^triton_fp8.py: " $R/bench.txt | cut -c1-160
grep -E "^(Thread|Current thread)|^  File" $R/bench.txt | grep -v threading.py | head -20 | cut -c1-160
python3 lab/standalone.py $S tests/zoo_gpu/signals_done_early.py tests/zoo_gpu/writes_into_slot.py > /dev/null
FILES="--submission submissions/triton_bf16.py --submission submissions/triton_fp8.py --submission submissions/triton_mxfp4.py
  --submission $S/signals_done_early.py --submission $S/writes_into_slot.py"
for watch in on off; do
  t0=$(date +%s.%N)
  timeout -k 10 170 python3 lab/fence_ab.py --watch $watch -- --mode leaderboard --sandbox require --no-progress \
    --budget 0.3 $FILES --db $R/lb.db --json $R/lb_$watch.json > $R/lb_$watch.txt 2>&1
  echo "leaderboard, watcher $watch: exit $? at $(wall $t0) s"
  grep -hE "^[a-z_0-9]+\.py: |^ *=?[0-9]+ " $R/lb_$watch.txt | cut -c1-180 | head -12
done
python3 lab/issue37_table.py $R/lb_on.json $R/lb_off.json 2>&1 | cut -c1-200 | head -40
if start_mps $R/mps2; then
  for conn in default 1 32; do
    if [ $conn = default ]; then unset CUDA_DEVICE_MAX_CONNECTIONS; else export CUDA_DEVICE_MAX_CONNECTIONS=$conn; fi
    timeout -k 5 60 python3 lab/watcher_probe.py --calls 100 > $R/watcher_$conn.txt 2>&1
    echo "watcher_probe, connections $conn: exit $?"; tail -1 $R/watcher_$conn.txt | cut -c1-220
  done
  unset CUDA_DEVICE_MAX_CONNECTIONS
fi
stop_mps
for flags in "" --bwrap; do
  timeout -k 5 60 python3 lab/ipc_probe.py $flags > "$R/ipc${flags// /}.txt" 2>&1
  echo "ipc_probe $flags: exit $?"; tail -1 "$R/ipc${flags// /}.txt" | cut -c1-220
done
tar czf "$OUT/r37r.tgz" -C /tmp r37r 2>/dev/null
