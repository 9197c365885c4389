#!/usr/bin/env bash
# Issue 16 on the H200 (device tool, carry .whl): triton_bf16's launch for short sequences
# (LAUNCH[(1, False)], the 1k shapes) swept over tile, warps and stages; every output checked.
#   OUT=<folder> bash lab/h200_bf16_launch.sh   # CASES overrides the benchmark cases (default 0,2,4,6)
source lab/h200_setup.sh
ARGS=(--config '{}')
for launch in "32, 4, 3" "64, 4, 2" "32, 8, 2" "16, 4, 4" "64, 8, 3"; do
  read -r bn nw ns <<< "${launch//,/}"
  ARGS+=(--config "{'LAUNCH': {(1, False): {'block_n': $bn, 'num_warps': $nw, 'num_stages': $ns}}}")
done
ARGS+=(--config '{"WARPS_PER_SM": 4}')
timeout ${SWEEP_SECONDS:-240} python3 lab/knob_sweep.py submissions/triton_bf16.py --cases "${CASES:-0,2,4,6}" \
  "${ARGS[@]}" > "$OUT/sweep_bf16_launch.txt" 2> "$OUT/sweep_bf16_launch.err"
echo "sweep bf16 launch rc=$?"; tail -3 "$OUT/sweep_bf16_launch.err"; tail -9 "$OUT/sweep_bf16_launch.txt"
