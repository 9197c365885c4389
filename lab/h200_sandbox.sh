#!/usr/bin/env bash
# Issue 14's device run: the sandbox and the profiler's audit on the H200, in one call.
# Usage, on the GPU machine from the repo root (.whl/ carried):  bash lab/h200_sandbox.sh   (logs under $OUT)
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-results/device}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)  # absolute: the before step runs from .before/
if [[ ${PYTHONPATH:-} != */tmp/site* ]]; then  # lab/h200_lanes.sh installs the wheels once for all its lanes
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PATH=$PATH:/usr/local/cuda/bin
DB=${DB:-/tmp/mla.db}
LOGS=${LOGS:-/tmp/logs}
STEPS=${STEPS:-probe}
run() { local name=$1; shift; echo "== $name: $*" | tee -a "$OUT/$name.txt"; local t0=$(date +%s.%N)
  timeout "${STEP_SECONDS:-240}" "$@" 2>&1 | tee -a "$OUT/$name.txt"
  echo "exit ${PIPESTATUS[0]} wall $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s" | tee -a "$OUT/$name.txt"; }
if [[ $STEPS == *probe* ]]; then
  run ncu_probe ncu $(python3 -c "from harness.api import ncu_command; print(' '.join(ncu_command('')[1:]))") python3 lab/ncu_probe.py 200
  run test_sandboxed python3 eval.py --mode test --no-progress --db $DB --logs $LOGS --sandbox require --submission submissions/triton_bf16.py
fi
if [[ $STEPS == *selftest* ]]; then  # the check's margins on the full-size cases
  run selftest python3 eval.py --mode selftest --no-progress
fi
if [[ $STEPS == *ncubwrap* ]]; then
  run ncubwrap python3 lab/ncu_sandbox_probe.py
fi
if [[ $STEPS == *l2persist* ]]; then  # the timer's persisting-L2 reset, with and without it
  run l2_persist python3 lab/l2_persist_check.py
fi
if [[ $STEPS == *zoo* ]]; then  # each zoo_gpu file gets what its docstring says; the honest controls pass
  run zoo_gpu python3 eval.py --mode leaderboard --budget 0.3 --no-progress --db $DB --logs $LOGS --sandbox require \
    --json "$OUT/zoo.json" \
    --submission tests/zoo_gpu/forges_timer.py --submission tests/zoo_gpu/forges_reply.py \
    --submission tests/zoo_gpu/works_after_timer.py --submission tests/zoo_gpu/side_stream.py \
    --submission tests/zoo_gpu/patches_events.py --submission tests/zoo_gpu/replaces_event_class.py \
    --submission tests/zoo_gpu/kills_profiler.py --submission tests/zoo_gpu/writes_report.py \
    --submission tests/zoo_gpu/labels_as_warmup.py --submission tests/zoo_gpu/persists_in_l2.py \
    --submission tests/zoo_gpu/skips_flush.py \
    --submission tests/zoo/prints_results.py --submission tests/zoo/probes_env.py \
    --submission submissions/triton_bf16.py
fi
if [[ $STEPS == *bundled* ]]; then  # every bundled submission, audited: none may be rejected
  run bundled python3 eval.py --mode leaderboard --budget ${BUDGET:-1} --no-progress --db $DB --logs $LOGS \
    --sandbox require --json "$OUT/bundled.json" ${BUNDLED:-}
fi
if [[ $STEPS == *start* ]]; then
  run start_cost python3 lab/sandbox_start_cost.py cuda ${START_RUNS:-5}
fi
if [[ $STEPS == *cost* ]]; then
  for i in $(seq 1 ${COST_RUNS:-2}); do
    run lb_plain python3 eval.py --mode leaderboard --no-progress --db $DB --logs $LOGS --sandbox off --no-audit --submission submissions/triton_bf16.py
    run lb_sandboxed python3 eval.py --mode leaderboard --no-progress --db $DB --logs $LOGS --sandbox require --no-audit --submission submissions/triton_bf16.py
    run lb_audited python3 eval.py --mode leaderboard --no-progress --db $DB --logs $LOGS --sandbox require --submission submissions/triton_bf16.py
  done
fi
if [[ $STEPS == *before* ]]; then  # issue 18: the leaderboard before its changes (.before/ = git archive of BEFORE) and now
  for i in $(seq 1 ${BEFORE_ROUNDS:-2}); do
    (cd .before && run before python3 eval.py --mode leaderboard --no-progress --db /tmp/before.db --logs /tmp/logs_before \
      --sandbox require --no-audit ${BEFORE_SUBMISSIONS:-})
    run after python3 eval.py --mode leaderboard --no-progress --db /tmp/after.db --logs $LOGS --sandbox require --no-audit \
      --json "$OUT/after_$i.json" ${BEFORE_SUBMISSIONS:-}
  done
  python3 - /tmp/before.db /tmp/after.db <<'PY' | tee "$OUT/before_after.txt"
import sqlite3, sys
rows = {}
for label, path in (("before", sys.argv[1]), ("after", sys.argv[2])):
    for run, name, geo in sqlite3.connect(path).execute(
            "SELECT s.run_id, s.name, s.geomean_us FROM submissions s ORDER BY s.run_id"):
        rows.setdefault(name, {}).setdefault(label, []).append(geo and round(geo, 2))
print("submission | before geomean µs (each run) | after geomean µs (each run)")
for name, by in rows.items():
    print(f"{name} | {by.get('before')} | {by.get('after')}")
PY
fi
if [[ $STEPS == *seeds* ]]; then  # fresh seeds, audited, no false rejection
  for seed in ${SEED_LIST:-$(seq 1 ${SEEDS:-20})}; do
    (( $(date +%s) < ${SEEDS_UNTIL:-9999999999} )) || break
    run seeds python3 eval.py --mode leaderboard --budget ${SEED_BUDGET:-0.05} --no-progress --db $DB --logs $LOGS \
      --sandbox require --seed $((seed * 7919)) --json "$OUT/seed_$seed.json" ${SEED_SUBMISSIONS:---submission submissions/triton_bf16.py \
      --submission submissions/triton_fp8.py --submission submissions/triton_mxfp4.py --submission submissions/torch_batched.py}
  done
  grep -c "^exit 0" "$OUT/seeds.txt"
fi
python3 - "$DB" <<'PY' | tee "$OUT/summary.txt"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print("run | sandboxed | submission | ok | geomean µs | scan | audit | worst timed/audit")
for run, sb, name, ok, geo, scanned, audit, sid in db.execute(
        "SELECT r.id, r.sandboxed, s.name, s.ok, s.geomean_us, s.scan, s.audit, s.id FROM submissions s JOIN runs r ON r.id = s.run_id"):
    ratios = [m / a for m, a in db.execute("SELECT median_us, audit_us FROM cases WHERE submission_id = ? AND audit_us > 0", (sid,))]
    print(f"{run} | {sb} | {name} | {ok} | {geo and round(geo, 1)} | {scanned[:40]} | {audit[:60]} | {min(ratios) if ratios else None}")
PY
tar czf "$OUT/logs.tgz" -C "$(dirname "$LOGS")" "$(basename "$LOGS")" 2>/dev/null
ls "$LOGS"/*.audit.csv >/dev/null 2>&1 && tar czf "$OUT/audit_reports.tgz" -C "$LOGS" $(cd "$LOGS" && ls *.audit.csv)
