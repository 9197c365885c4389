#!/usr/bin/env bash
# Issue 16 on the H200 (device tool, carry .whl): the bundled fp8 file's tests on the GPU (its sm_90
# Gluon path), then its knob sweep beside bf16: the Gluon path on and off, and its settings.
#   bash tools/h200_kernels.sh            # OUT=<folder> for the logs; CASES, CONFIGS override
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-results/device}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" | tee "$OUT/versions.txt"
timeout ${TEST_SECONDS:-200} python3 eval.py --mode test --no-progress --db /tmp/k.db --logs /tmp/klogs --sandbox off \
  --submission submissions/triton_fp8.py > "$OUT/test_fp8.txt" 2>&1
echo "test rc=$?"; tail -25 "$OUT/test_fp8.txt"
CASES=${CASES:-0,1,2,3,4,5,6,7}
timeout ${SWEEP_SECONDS:-300} python3 tools/knob_sweep.py submissions/triton_fp8.py --cases "$CASES" \
  --config '{}' --config '{"SM90_GLUON": false}' --config '{"SM90_WIDE": false}' \
  > "$OUT/sweep_fp8.txt" 2> "$OUT/sweep_fp8.err"
echo "sweep fp8 rc=$?"; tail -5 "$OUT/sweep_fp8.err"
timeout ${BF16_SECONDS:-60} python3 tools/knob_sweep.py submissions/triton_bf16.py --cases "$CASES" --config '{}' \
  > "$OUT/sweep_bf16.txt" 2> "$OUT/sweep_bf16.err"
echo "sweep bf16 rc=$?"
if [[ -n ${PROFILE:-} ]]; then  # Nsight Compute on the fp8 file's kernels, PROFILE="<case index> ..."
  export PATH=$PATH:/usr/local/cuda/bin
  for case in $PROFILE; do
    timeout 120 ncu --profile-from-start off --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables \
      --section WarpStateStats --section SchedulerStats -k regex:mla_decode -o "$OUT/fp8_case$case" \
      python3 tools/ncu_case.py submissions/triton_fp8.py "$case" > "$OUT/ncu_$case.log" 2>&1
    ncu --import "$OUT/fp8_case$case.ncu-rep" --page details --print-units base > "$OUT/fp8_case$case.txt" 2>&1
    echo "== case $case"; grep -E "Duration|DRAM Throughput|L1/TEX Cache|Warp Cycles Per Issued|Eligible Warps" "$OUT/fp8_case$case.txt" | head -8
  done
fi
tail -3 "$OUT/sweep_bf16.err"; tail -8 "$OUT/sweep_fp8.txt"; tail -3 "$OUT/sweep_bf16.txt"
