# Issue 37, acceptances 3 and 4 and the zoo on HEAD (~9 min, one GPU): a fenced leaderboard of the
# bundled Triton files at the default budget with CUPTI beside each (lab/cupti_compare.py, every case);
# torch_loop fenced over seeds 1-3 and once with --no-audit (its walls); then every attack of
# tests/zoo_gpu beside triton_bf16 (the context-ending ones last, in a run of their own).
# Outputs packed into r37k.tgz. Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37k.sh
source lab/h200_setup.sh
S=/tmp/standalone; R=/tmp/r37k; mkdir -p $R
python3 lab/standalone.py $S tests/zoo_gpu/*.py > /dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
wall() { python3 -c "import time;print(round(time.time()-$1,1))"; }
LB="python3 eval.py --mode leaderboard --sandbox require --no-progress"
t0=$(date +%s.%N)
timeout 120 $LB --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
  --submission submissions/triton_mxfp4.py --json $R/bundled.json > $R/bundled.txt 2>&1
echo "bundled: exit $? at $(wall $t0) s"
for f in triton_bf16 triton_fp8 triton_mxfp4; do
  timeout 60 python3 lab/cupti_compare.py submissions/$f.py --calls 10 --compare $R/bundled.json > $R/cupti_$f.txt 2>&1
  echo "cupti $f: exit $?"
done
t0=$(date +%s.%N)
timeout 60 python3 eval.py --mode leaderboard --no-audit --sandbox require --no-progress --budget 0.2 \
  --submission submissions/torch_loop.py --json $R/loop_plain.json > $R/loop_plain.txt 2>&1
echo "torch_loop --no-audit: exit $? wall $(wall $t0) s"
for seed in 1 2 3; do
  t0=$(date +%s.%N)
  timeout 60 $LB --budget 0.2 --seed $seed --submission submissions/torch_loop.py --json $R/loop_$seed.json \
    > $R/loop_$seed.txt 2>&1
  echo "torch_loop fenced seed $seed: exit $? wall $(wall $t0) s"
done
LAST="resident_at_gate illegal_address rewrites_done holds_sms_at_census preloads_kv"
FIRST=""
for f in tests/zoo_gpu/*.py; do n=$(basename $f .py); case " $LAST " in *" $n "*) ;; *) FIRST="$FIRST --submission $S/$n.py";; esac; done
t0=$(date +%s.%N)
timeout 200 $LB --budget 0.15 --timeout 30 --submission submissions/triton_bf16.py $FIRST --json $R/z1.json > $R/z1.txt 2>&1
echo "zoo: exit $? at $(wall $t0) s"
LASTS=""; for n in $LAST; do LASTS="$LASTS --submission $S/$n.py"; done
t0=$(date +%s.%N)
timeout 90 $LB --budget 0.15 --timeout 20 --submission submissions/triton_bf16.py $LASTS --json $R/z2.json > $R/z2.txt 2>&1
echo "zoo (context-ending last): exit $? at $(wall $t0) s"
tar czf "$OUT/r37k.tgz" -C /tmp r37k 2>/dev/null
for f in triton_bf16 triton_fp8 triton_mxfp4; do echo "--- cupti $f"; tail -11 $R/cupti_$f.txt | cut -c1-120; done
grep -h "^torch_loop.py: \|^wall" $R/loop_*.txt | cut -c1-160
grep -hE "^[a-z_0-9]+\.py: (pass|FAIL)" $R/z1.txt $R/z2.txt | cut -c1-200
