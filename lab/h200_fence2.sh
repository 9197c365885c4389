# A second, shorter pass of lab/h200_fence.sh: the bundled files, the input-watching attack and the
# CPU attack's honest neighbour, with the fence's calibration as it is now.
# Usage (device machine, wheels carried in .whl): bash lab/h200_fence2.sh
source lab/h200_setup.sh
Z=tests/zoo_gpu
timeout 200 python3 eval.py --mode leaderboard --sandbox require --no-progress --budget 1 \
  --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py --submission submissions/triton_mxfp4.py \
  --submission $Z/watches_inputs.py --json "$OUT/pass2.json" > "$OUT/pass2.txt" 2>&1; echo "pass2: exit $?"
tail -n 14 "$OUT/pass2.txt"
python3 lab/fence_table.py "$OUT/pass2.json"
