# The fenced timing on the H200, in one device call: the bundled files' leaderboard, then the GPU
# zoo's timing attacks beside triton_bf16, then the CPU attack on two cases; tables last.
# Usage (device machine, wheels carried in .whl): bash lab/h200_fence.sh
source lab/h200_setup.sh
lb() { local t=$1; shift; timeout "$t" python3 eval.py --mode leaderboard --sandbox require --no-progress "$@"; }
subs() { for f in "$@"; do printf -- '--submission\n%s\n' "$f"; done; }
Z=tests/zoo_gpu
mapfile -t BUNDLED < <(subs submissions/triton_bf16.py submissions/triton_fp8.py submissions/triton_mxfp4.py)
mapfile -t ZOO < <(subs submissions/triton_bf16.py $Z/forges_timer.py $Z/forges_reply.py $Z/forges_fence.py \
  $Z/watches_inputs.py $Z/detects_fence.py $Z/side_stream.py $Z/works_after_timer.py $Z/patches_events.py)
mapfile -t CPU < <(subs submissions/triton_bf16.py $Z/computes_on_cpu.py)
lb 150 "${BUNDLED[@]}" --json "$OUT/bundled.json" > "$OUT/bundled.txt" 2>&1; echo "bundled: exit $?"
lb 190 --budget 1 "${ZOO[@]}" --json "$OUT/zoo.json" > "$OUT/zoo.txt" 2>&1; echo "zoo: exit $?"
lb 60 --budget 1 --timeout 40 --shape batchsize=4,qseqlen=1,kvseqlen=1024 --shape batchsize=32,qseqlen=1,kvseqlen=8192 \
   "${CPU[@]}" --json "$OUT/cpu_attack.json" > "$OUT/cpu_attack.txt" 2>&1; echo "cpu attack: exit $?"
tail -n 30 "$OUT/bundled.txt"
python3 lab/fence_table.py "$OUT/bundled.json" "$OUT/zoo.json" "$OUT/cpu_attack.json"
