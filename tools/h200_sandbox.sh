#!/usr/bin/env bash
# Issue 14's device run: the sandbox and the profiler's audit on the H200, in one call.
# Usage, on the GPU machine from the repo root (.whl/ carried):  bash tools/h200_sandbox.sh   (logs under $OUT)
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-results/device}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site
export PATH=$PATH:/usr/local/cuda/bin
DB=/tmp/mla.db
STEPS=${STEPS:-probe}
run() { local name=$1; shift; echo "== $name: $*" | tee -a "$OUT/$name.txt"; local t0=$(date +%s.%N)
  timeout "${STEP_SECONDS:-240}" "$@" 2>&1 | tee -a "$OUT/$name.txt"
  echo "exit ${PIPESTATUS[0]} wall $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s" | tee -a "$OUT/$name.txt"; }
if [[ $STEPS == *probe* ]]; then
  run ncu_probe ncu $(python3 -c "from harness.audit import ncu_command; from pathlib import Path; print(' '.join(ncu_command('', Path('$OUT/ncu_probe.csv'))[1:]))") python3 tools/ncu_probe.py 200
  head -c 3000 "$OUT/ncu_probe.csv"
  run test_sandboxed python3 eval.py --mode test --no-progress --db $DB --logs /tmp/logs --sandbox require --submission submissions/triton_bf16.py
fi
if [[ $STEPS == *cost* ]]; then
  for i in 1 2; do
    run lb_plain python3 eval.py --mode leaderboard --no-progress --db $DB --logs /tmp/logs --sandbox off --no-audit --submission submissions/triton_bf16.py
    run lb_sandboxed python3 eval.py --mode leaderboard --no-progress --db $DB --logs /tmp/logs --sandbox require --no-audit --submission submissions/triton_bf16.py
    run lb_audited python3 eval.py --mode leaderboard --no-progress --db $DB --logs /tmp/logs --sandbox require --submission submissions/triton_bf16.py
  done
fi
tar czf "$OUT/logs.tgz" -C /tmp logs 2>/dev/null
