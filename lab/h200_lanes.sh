#!/usr/bin/env bash
# Several steps of lab/h200_sandbox.sh at once, one lane per GPU of a multi-GPU machine, each lane
# with its own database, logs and output folder; stops every lane at a deadline and packs what they
# wrote into one archive (the device tool brings back at most 8 files).
# Usage, on the GPU machine from the repo root (.whl/ carried, .before/ carried for the before step):
#   LANES="0:STEPS=zoo 1:STEPS=seeds,SEED_LIST=1+5+9" DEADLINE=520 bash lab/h200_lanes.sh
# A lane is GPU:VAR=VALUE,VAR=VALUE...; a + inside a value stands for a space.
set -uo pipefail
OUT=${OUT:-results/device}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site
start=$(date +%s)
pids=()
for lane in $LANES; do
  gpu=${lane%%:*}; vars=${lane#*:}; name=lane$gpu
  (
    IFS=',' read -ra assignments <<< "$vars"
    for a in "${assignments[@]}"; do v=${a#*=}; export "${a%%=*}=${v//+/ }"; done
    export CUDA_VISIBLE_DEVICES=$gpu OUT=/tmp/out/$name DB=/tmp/$name.db LOGS=/tmp/logs_$name
    export SEEDS_UNTIL=$((start + ${SEEDS_DEADLINE:-${DEADLINE:-520} - 120}))
    exec bash lab/h200_sandbox.sh
  ) > "/tmp/$name.txt" 2>&1 &
  pids+=($!)
done
while (( $(date +%s) < start + ${DEADLINE:-520} )) && kill -0 "${pids[@]}" 2>/dev/null; do sleep 2; done
for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && { echo "lane pid $pid stopped at the deadline"; pkill -TERM -P "$pid"; kill "$pid"; }; done
sleep 2
for lane in $LANES; do name=lane${lane%%:*}; cp "/tmp/$name.txt" /tmp/out/ 2>/dev/null
  echo "== $name ($lane): last lines"; grep -E "^(== |exit |[0-9]+ \| )|FAIL|PASS|rejected|submission \|" "/tmp/$name.txt" | tail -40; done
tar czf "$OUT/lanes.tgz" -C /tmp out
echo "wall $(( $(date +%s) - start )) s"
