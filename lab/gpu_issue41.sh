# Issue 41 on one GPU: ties over five seeds (the three bundled Triton files and a copy of triton_fp8
# with 3% more GPU work), --compare pairs of those runs, a --replay of the first run's bundle, a 10%
# copy against the original at the same path (--compare: "slower" on every case), the clock watch's
# lines, and joules per call (--energy). The slowed copies are made standalone first (the sandbox
# shows a worker only its own file). Usage (device machine, wheels in .whl incl. nvidia-ml-py, carry
# .whl): a device call allows 10 minutes, so in parts on one warm machine: PART=1 runs the leaderboards
# of SEEDS (five: ~6 min on an H200, ~9.5 min on an H100, so there give SEEDS="4101 4102 4103", then
# SEEDS="4104 4105"), then PART=2 the --compare pairs of every seed run so far, the replay of the first
# seed's bundle, the 10% copy and the table (~3 min), then lab/gpu_energy.sh (~4-5 min). Files gather in /tmp/i41 (kept
# on a warm machine between calls) and are packed into $OUT after each part (i41_seeds.tgz, i41.tgz).
source lab/h200_setup.sh
python3 -c "import pynvml; pynvml.nvmlInit(); print('NVML', pynvml.nvmlSystemGetDriverVersion())" || echo "no NVML"
S=/tmp/s41
python3 lab/standalone.py $S tests/slower/triton_fp8_plus3.py tests/slower/triton_fp8_plus10.py
BUDGET=${BUDGET:-0.3}
SEEDS=${SEEDS:-"4101 4102 4103 4104 4105"}
W=/tmp/i41; mkdir -p $W
DB="$W/issue41.db"
LB="python3 eval.py --sandbox require --no-progress --db $DB --logs /tmp/l41"
start=$(date +%s)
stamp() { echo "$1: exit $2 at $(( $(date +%s) - start )) s"; }
PART=${PART:-both}
first=$(ls $W/seed_*.bundle.json 2>/dev/null | sed "s/.*seed_\([0-9]*\).*/\1/" | sort -n | head -1)
first=${first:-${SEEDS%% *}}
if [ "$PART" != 2 ]; then
for seed in $SEEDS; do
  timeout -k 10 150 $LB --mode leaderboard --budget $BUDGET --seed $seed --submission submissions/triton_bf16.py \
    --submission submissions/triton_fp8.py --submission submissions/triton_mxfp4.py \
    --submission $S/triton_fp8_plus3.py --json "$W/seed_$seed.json" --bundle "$W/seed_$seed.bundle.json" \
    > "$W/seed_$seed.txt" 2>&1
  stamp "seed $seed" $?
done
tar czf "$OUT/i41_seeds.tgz" -C /tmp i41 l41 2>/dev/null
[ "$PART" = 1 ] && exit 0
fi
ids=$(python3 -c "import glob, json, re; print(' '.join(str(json.load(open(p))['run']['run']) for p in sorted(
  (p for p in glob.glob('$W/seed_*.json') if not p.endswith('.bundle.json')), key=lambda p: re.findall(r'seed_(\d+)', p)[0])))")
set -- $ids
prev=""
for id in "$@" "$1"; do  # consecutive runs, and the last against the first: five pairs of five runs
  [ -n "$prev" ] && [ "$prev" != "$id" ] && python3 eval.py --db $DB --mode history --compare $prev $id \
    > "$W/compare_${prev}_$id.txt" 2>&1
  prev=$id
done
timeout -k 10 150 $LB --replay "$W/seed_$first.bundle.json" --json "$W/replay_$first.json" > "$W/replay_$first.txt" 2>&1
stamp "replay of seed $first" $?
mkdir -p /tmp/c41 && cp submissions/triton_fp8.py /tmp/c41/triton_fp8.py
timeout -k 10 90 $LB --mode benchmark --budget $BUDGET --submission /tmp/c41/triton_fp8.py --json "$W/plus10_a.json" \
  > "$W/plus10_a.log" 2>&1; stamp "original at /tmp/c41" $?
cp $S/triton_fp8_plus10.py /tmp/c41/triton_fp8.py
timeout -k 10 90 $LB --mode benchmark --budget $BUDGET --submission /tmp/c41/triton_fp8.py --json "$W/plus10_b.json" \
  > "$W/plus10_b.log" 2>&1; stamp "10% copy at /tmp/c41" $?
a=$(python3 -c "import json; print(json.load(open('$W/plus10_a.json'))['run']['run'])" 2>/dev/null)
b=$(python3 -c "import json; print(json.load(open('$W/plus10_b.json'))['run']['run'])" 2>/dev/null)
python3 eval.py --db $DB --mode history --compare $a $b > "$W/plus10_compare.txt" 2>&1
grep -h "triton_fp8_plus" /tmp/l41/triton_fp8*.log 2>/dev/null | sort | uniq | head -20 > "$W/calibration.txt"
echo "--- calibration of the slowed copies (worker logs)"; cut -c1-200 "$W/calibration.txt"
tar czf "$OUT/i41.tgz" -C /tmp i41 l41 2>/dev/null
python3 lab/issue41_table.py "$W" triton_fp8.py triton_fp8_plus3.py
echo "--- energy (lab/gpu_energy.sh)"
bash lab/gpu_energy.sh
