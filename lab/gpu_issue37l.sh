# Issue 37, acceptance 1 on HEAD (~8 min, one GPU): every attack of tests/zoo_gpu through the fenced
# leaderboard beside triton_bf16, in three groups, then each of those that may end the harness's GPU
# context under MPS (a fault ends every client's) in a run of its own. Outputs packed into r37l.tgz.
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37l.sh
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/r37l; mkdir -p $R
python3 lab/standalone.py $S tests/zoo_gpu/*.py > /dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
wall() { python3 -c "import time;print(round(time.time()-$1,1))"; }
LB="python3 eval.py --mode leaderboard --sandbox require --no-progress --budget 0.15"
LAST="resident_at_gate illegal_address rewrites_done holds_sms_at_census preloads_kv"
A=""; B=""; C=""; i=0
for f in tests/zoo_gpu/*.py; do
  n=$(basename $f .py); case " $LAST " in *" $n "*) continue;; esac
  case $((i % 3)) in 0) A="$A --submission $S/$n.py";; 1) B="$B --submission $S/$n.py";; *) C="$C --submission $S/$n.py";; esac
  i=$((i + 1))
done
for group in A B C; do
  t0=$(date +%s.%N)
  timeout -k 10 170 $LB --timeout 25 --submission submissions/triton_bf16.py ${!group} --json $R/$group.json > $R/$group.txt 2>&1
  echo "zoo $group: exit $? at $(wall $t0) s"
done
for n in $LAST; do
  t0=$(date +%s.%N)
  timeout -k 5 40 $LB --timeout 20 --submission $S/$n.py --json $R/$n.json > $R/$n.txt 2>&1
  echo "zoo $n alone: exit $? at $(wall $t0) s"
done
for mode in combine tail; do  # signals_done_early's other late steps (its docstring)
  SUBMISSION_EARLY_DONE=$mode timeout -k 5 60 $LB --timeout 20 --submission $S/signals_done_early.py \
    --json $R/early_$mode.json > $R/early_$mode.txt 2>&1
  echo "signals_done_early, SUBMISSION_EARLY_DONE=$mode: exit $?"; grep -h "^signals_done_early.py: " $R/early_$mode.txt | cut -c1-200
done
# writes_into_slot with DONE stored by a kernel of its own, beside the same file signalling as the loop does
sed 's/"SUBMISSION_SLOT_DONE", "loop"/"SUBMISSION_SLOT_DONE", "kernel"/' $S/writes_into_slot.py > $S/slot_kernel_done.py
timeout -k 5 90 $LB --timeout 20 --submission submissions/triton_bf16.py --submission $S/writes_into_slot.py \
  --submission $S/slot_kernel_done.py --json $R/slot_done.json > $R/slot_done.txt 2>&1
echo "writes_into_slot, DONE from the loop and from a kernel: exit $?"; grep -h "^[a-z_0-9]*\.py: " $R/slot_done.txt | cut -c1-200
tar czf "$OUT/r37l.tgz" -C /tmp r37l 2>/dev/null
grep -hE "^[a-z_0-9]+\.py: (pass|FAIL)" $R/*.txt | cut -c1-200
