# Issue 41 in one device call when little device time is left (~9.5 min): lab/gpu_energy.sh first (the
# burst design's joules per call), then as many leaderboard seeds of lab/gpu_issue41.sh's set as fit
# before LIMIT_S (each seed measured: the next starts only if the slowest so far fits, with the
# comparisons and the replay after), the --compare pairs of consecutive seeds (and the last with the
# first), the replay of the first seed's bundle, and lab/issue41_table.py. Files in /tmp/i41 and
# /tmp/energy, packed into $OUT. Usage (device machine, wheels in .whl, carry .whl): LIMIT_S=570 bash lab/gpu_budget41.sh
source lab/h200_setup.sh
LIMIT_S=${LIMIT_S:-570}
t0=$(date +%s); left() { echo $(( LIMIT_S - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout -k 5 240 bash lab/gpu_energy.sh > /tmp/energy_run.txt 2>&1; echo "energy: exit $? at $(( $(date +%s) - t0 )) s"
S=/tmp/s41; W=/tmp/i41; DB="$W/issue41.db"; mkdir -p $W
python3 lab/standalone.py $S tests/slower/triton_fp8_plus3.py > /dev/null
LB="python3 eval.py --sandbox require --no-progress --db $DB --logs /tmp/l41"
slowest=0
for seed in 4111 4112 4113 4114 4115; do
  [ $(left) -gt $(( slowest + 80 )) ] || { echo "seed $seed: no time left ($(left) s)"; break; }
  s0=$(date +%s)
  timeout -k 10 $(( $(left) - 60 )) $LB --mode leaderboard --budget 0.3 --seed $seed --submission submissions/triton_bf16.py \
    --submission submissions/triton_fp8.py --submission submissions/triton_mxfp4.py --submission $S/triton_fp8_plus3.py \
    --json "$W/seed_$seed.json" --bundle "$W/seed_$seed.bundle.json" > "$W/seed_$seed.txt" 2>&1
  echo "seed $seed: exit $? in $(( $(date +%s) - s0 )) s"; took=$(( $(date +%s) - s0 )); [ $took -gt $slowest ] && slowest=$took
done
ids=$(python3 -c "import glob, json, re; print(' '.join(str(json.load(open(p))['run']['run']) for p in sorted(
  (p for p in glob.glob('$W/seed_*.json') if not p.endswith('.bundle.json')), key=lambda p: re.findall(r'seed_(\d+)', p)[0])))")
set -- $ids; prev=""
for id in "$@" "$1"; do
  [ -n "$prev" ] && [ "$prev" != "$id" ] && python3 eval.py --db $DB --mode history --compare $prev $id > "$W/compare_${prev}_$id.txt" 2>&1
  prev=$id
done
if [ $(left) -gt $(( slowest / 2 + 20 )) ]; then
  timeout -k 5 $(( $(left) - 10 )) $LB --replay "$W/seed_4111.bundle.json" --json "$W/replay_4111.json" > "$W/replay_4111.txt" 2>&1
  echo "replay of seed 4111: exit $? at $(( $(date +%s) - t0 )) s"
else echo "replay: no time left ($(left) s)"; fi
tar czf "$OUT/i41.tgz" -C /tmp i41 l41 energy energy_run.txt 2>/dev/null
python3 lab/issue41_table.py "$W" triton_fp8.py triton_fp8_plus3.py
echo "--- energy"; grep -v "^\s*$" /tmp/energy_run.txt | tail -32
