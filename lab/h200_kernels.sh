#!/usr/bin/env bash
# Issue 16 on the H200 (device tool, carry .whl): a bundled file's sm_90 Gluon path forced on every
# test case (lab/sm90_check.py), the file's tests on the GPU, then its knob sweep beside bf16: the
# Gluon path on and off.
#   FILE=mxfp4 bash lab/h200_kernels.sh   # FILE: fp8 (default) or mxfp4; OUT=<folder> for the logs;
#                                           # CASES, PROFILE, *_SECONDS override (BF16_SECONDS=0: no bf16);
#                                           # STRESS="1 5 6": lab/stress_check.py on those cases, Gluon on
source lab/h200_setup.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" | tee "$OUT/versions.txt"
FILE=${FILE:-fp8}
timeout ${CHECK_SECONDS:-150} python3 lab/sm90_check.py --file "$FILE" > "$OUT/sm90_check_$FILE.txt" 2>&1
echo "sm90_check rc=$?"; tail -16 "$OUT/sm90_check_$FILE.txt"
timeout ${TEST_SECONDS:-200} python3 eval.py --mode test --no-progress --db /tmp/k.db --logs /tmp/klogs --sandbox off \
  --submission "submissions/triton_$FILE.py" > "$OUT/test_$FILE.txt" 2>&1
echo "test rc=$?"; tail -25 "$OUT/test_$FILE.txt"
for case in ${STRESS:-}; do  # many calls on fresh inputs, every output checked (a fault on a few percent of calls)
  timeout ${STRESS_SECONDS:-60} python3 lab/stress_check.py "submissions/triton_$FILE.py" --case "$case" \
    --calls ${STRESS_CALLS:-300} --config '{"SM90_GLUON": true}' 2>&1 | tail -3
done
CASES=${CASES:-0,1,2,3,4,5,6,7}
if [[ $FILE == fp8 ]]; then  # as shipped (Gluon on), the portable kernel alone, Gluon without the two-per-SM launch
  CONFIGS=('{}' '{"SM90_GLUON": false}' '{"SM90_WIDE": false}')
else
  CONFIGS=('{}' '{"SM90_GLUON": false}')
fi
ARGS=(); for c in "${CONFIGS[@]}"; do ARGS+=(--config "$c"); done
timeout ${SWEEP_SECONDS:-300} python3 lab/knob_sweep.py "submissions/triton_$FILE.py" --cases "$CASES" \
  "${ARGS[@]}" ${EXTRA_CONFIGS:-} > "$OUT/sweep_$FILE.txt" 2> "$OUT/sweep_$FILE.err"
echo "sweep $FILE rc=$?"; tail -5 "$OUT/sweep_$FILE.err"
[[ ${BF16_SECONDS:-60} == 0 ]] || timeout ${BF16_SECONDS:-60} python3 lab/knob_sweep.py submissions/triton_bf16.py --cases "$CASES" --config '{}' \
  > "$OUT/sweep_bf16.txt" 2> "$OUT/sweep_bf16.err"
echo "sweep bf16 rc=$?"
if [[ -n ${PROFILE:-} ]]; then  # Nsight Compute on the file's kernels, PROFILE="<case index> ..."
  export PATH=$PATH:/usr/local/cuda/bin
  for case in $PROFILE; do
    timeout 120 ncu --profile-from-start off --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables \
      --section WarpStateStats --section SchedulerStats -k regex:mla_decode -o "$OUT/${FILE}_case$case" \
      python3 lab/ncu_case.py "submissions/triton_$FILE.py" "$case" > "$OUT/ncu_$case.log" 2>&1
    ncu --import "$OUT/${FILE}_case$case.ncu-rep" --page details --print-units base > "$OUT/${FILE}_case$case.txt" 2>&1
    echo "== case $case"; grep -E "Duration|DRAM Throughput|L1/TEX Cache|Warp Cycles Per Issued|Eligible Warps" "$OUT/${FILE}_case$case.txt" | head -8
  done
fi
tail -8 "$OUT/sweep_$FILE.txt"; [[ ! -f "$OUT/sweep_bf16.txt" ]] || tail -3 "$OUT/sweep_bf16.txt"
