# CUPTI's trace of the honest multi-kernel file and triton_bf16 with the process an MPS client (as a
# fenced worker is) beside the same trace without MPS: does MPS itself add time per kernel?
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_cupti_mps.sh
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/rmps; mkdir -p $R
python3 lab/standalone.py $S tests/honest/multi_kernel.py > /dev/null
for mode in plain mps; do
  if [ $mode = mps ]; then
    start_mps $R
  fi
  timeout 50 python3 lab/cupti_compare.py $S/multi_kernel.py --calls 8 --case 0 --case 2 > $R/mk_$mode.txt 2>&1
  echo "multi_kernel $mode: exit $?"
  timeout 40 python3 lab/cupti_compare.py submissions/triton_bf16.py --calls 8 --case 0 --case 3 > $R/bf16_$mode.txt 2>&1
  echo "bf16 $mode: exit $?"
done
stop_mps
tar czf "$OUT/rmps.tgz" -C /tmp rmps 2>/dev/null
for f in $R/*.txt; do echo "--- $f"; grep -A4 "case " $f | head -5 | cut -c1-110; done
