# The census (harness/parent/census.py) and the per-worker MPS view (harness/parent/mps.py) on the H200: the probe,
# the MPS pipe folder's entries, and a fenced leaderboard of the given files (default: triton_bf16).
# Usage (device machine, wheels carried in .whl): bash lab/h200_census.sh [FILE ...]
source lab/h200_setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 lab/census_probe.py > "$OUT/census_probe.txt" 2>&1; echo "census_probe: exit $?"; cat "$OUT/census_probe.txt" | tail -8
python3 - <<'PY' 2>&1 | tee "$OUT/mps_pipe.txt"
import os
from harness.api import mps
print("mps.start:", mps.start())
import torch
torch.zeros(1, device="cuda")
pipe = os.environ.get(mps.PIPE)
for e in sorted(os.scandir(pipe), key=lambda e: e.name):
    st = e.stat(follow_symlinks=False)
    print(f"  {e.name:<28} mode {oct(st.st_mode)}")
PY
FILES=("$@")
[ ${#FILES[@]} -eq 0 ] && FILES=(submissions/triton_bf16.py)
ARGS=()
for f in "${FILES[@]}"; do ARGS+=(--submission "$f"); done
start=$(date +%s.%N)
timeout ${LB_SECONDS:-400} python3 eval.py --mode leaderboard --sandbox require --no-progress --budget ${BUDGET:-1} \
  "${ARGS[@]}" --json "$OUT/lb.json" > "$OUT/lb.txt" 2>&1; echo "leaderboard: exit $? in $(echo "$(date +%s.%N) - $start" | bc) s"
tail -n 30 "$OUT/lb.txt"
python3 lab/fence_table.py "$OUT/lb.json"
