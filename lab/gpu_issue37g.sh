# Issue 37, where many-kernel calls' excess under the fence comes from (~8 min, one GPU): the wait-cost
# probe (lab/wait_cost_probe.py: does a stream waiting on a flag slow another stream's kernels?)
# without and with an MPS daemon, on one-element adds, multi_kernel and triton_bf16 at 4x1k; then the
# fence's null calls with one kernel and fifty beside multi_kernel (lab/gpu_issue37f.sh).
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37g.sh
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/r37g; mkdir -p $R
python3 lab/standalone.py $S tests/honest/multi_kernel.py > /dev/null
for mode in ${MODES:-plain mps}; do
  if [ $mode = mps ]; then
    start_mps $R
  fi
  timeout 60 python3 lab/wait_cost_probe.py --label $mode --file $S/multi_kernel.py > $R/probe_mk_$mode.txt 2>&1
  echo "probe multi_kernel $mode: exit $?"
  timeout 60 python3 lab/wait_cost_probe.py --label $mode --file submissions/triton_bf16.py > $R/probe_bf16_$mode.txt 2>&1
  echo "probe bf16 $mode: exit $?"
done
stop_mps
[ -n "${NO_F:-}" ] || OUT=$OUT bash lab/gpu_issue37f.sh > $R/f.txt 2>&1
echo "37f: exit $?"
tar czf "$OUT/r37g.tgz" -C /tmp r37g 2>/dev/null
cat $R/probe_mk_plain.txt $R/probe_mk_mps.txt | cut -c1-120
grep -v "^ *1 add\|50 adds" $R/probe_bf16_mps.txt | cut -c1-120
tail -30 $R/f.txt | cut -c1-170
