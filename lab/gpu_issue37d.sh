# Issue 37 on one GPU (~8 min): two back-to-back fenced leaderboards of the bundled Triton files and
# writes_into_slot (run-to-run agreement, `slot copy µs`), then every attack of tests/zoo_gpu through
# the fenced leaderboard beside triton_bf16 (the ones whose end takes the harness's GPU context under
# MPS run last, in a run of their own). Outputs packed into r37d.tgz.
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37d.sh
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/r37d; mkdir -p $R
python3 lab/standalone.py $S tests/zoo_gpu/*.py > /dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
wall() { python3 -c "import time;print(round(time.time()-$1,1))"; }
LB="python3 eval.py --mode leaderboard --sandbox require --no-progress"
for run in 1 2; do
  t0=$(date +%s.%N)
  timeout 100 $LB --budget 0.3 --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
    --submission submissions/triton_mxfp4.py --submission $S/writes_into_slot.py --logs $R/b$run \
    --json $R/b$run.json > $R/b$run.txt 2>&1
  echo "bundled run $run: exit $? at $(wall $t0) s"
done
LAST="resident_at_gate illegal_address rewrites_done holds_sms_at_census preloads_kv"
FIRST=""
for f in tests/zoo_gpu/*.py; do n=$(basename $f .py); case " $LAST writes_into_slot " in *" $n "*) ;; *) FIRST="$FIRST --submission $S/$n.py";; esac; done
t0=$(date +%s.%N)
timeout 250 $LB --budget 0.2 --timeout 30 --submission submissions/triton_bf16.py $FIRST --logs $R/z1 \
  --json $R/z1.json > $R/z1.txt 2>&1
echo "zoo: exit $? at $(wall $t0) s"
t0=$(date +%s.%N)
LASTS=""; for n in $LAST; do LASTS="$LASTS --submission $S/$n.py"; done
timeout 100 $LB --budget 0.2 --timeout 20 --submission submissions/triton_bf16.py $LASTS --logs $R/z2 \
  --json $R/z2.json > $R/z2.txt 2>&1
echo "zoo (context-ending last): exit $? at $(wall $t0) s"
tar czf "$OUT/r37d.tgz" -C /tmp r37d 2>/dev/null
python3 lab/issue37_table.py $R/b1.json $R/b2.json $R/z1.json $R/z2.json
