# Issue 37: the wait-cost probe with the work in a second process (two MPS clients, as the fence's
# parent and worker), its work on a torch stream, the legacy default stream and a blocking stream of
# its own, on one-element adds and multi_kernel at 4x1k; then lab/gpu_issue37f.sh (~3 min, one GPU).
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37h.sh
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/r37h; mkdir -p $R
python3 lab/standalone.py $S tests/honest/multi_kernel.py > /dev/null
start_mps $R
for st in own default blocking; do
  timeout -k 10 120 python3 lab/wait_cost_probe.py --two-process --child-stream $st --label mps --file $S/multi_kernel.py >> $R/probe2.txt 2>&1
done
echo "probe two-process mps: exit $?"
stop_mps  # (the harness starts its own daemon)
tar czf "$OUT/r37h.tgz" -C /tmp r37h 2>/dev/null
cut -c1-150 $R/probe2.txt | tail -20
OUT=$OUT bash lab/gpu_issue37f.sh > $R/f.txt 2>&1
echo "37f: exit $?"
tail -22 $R/f.txt | cut -c1-150
