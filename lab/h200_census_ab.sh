# A/B of the fence's census position and the per-worker MPS view (lab/fence_ab.py) on two bundled
# files, after the census probe. Usage (device machine, wheels in .whl): bash lab/h200_census_ab.sh
source lab/h200_setup.sh
[ -z "${NO_PROBE:-}" ] && python3 lab/census_probe.py > "$OUT/census_probe.txt" 2>&1; echo "census_probe: exit $?"; tail -10 "$OUT/census_probe.txt"
for variant in ${VARIANTS:-"mid" "gate" "off" "mid --keep-view"}; do
  tag=$(echo "$variant" | tr -d ' -')
  timeout 200 python3 lab/fence_ab.py --census $variant -- --mode leaderboard --sandbox require --no-progress \
    --budget ${BUDGET:-1} --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
    --logs "/tmp/logs_$tag" --json "$OUT/ab_$tag.json" > "$OUT/ab_$tag.txt" 2>&1; echo "== $variant: exit $?"
  grep "fence_ab\|geomean\|unverified\|wall" "$OUT/ab_$tag.txt" | head -8
done
for tag in ${TAGS:-mid gate off midkeepview}; do python3 lab/fence_table.py "$OUT/ab_$tag.json" | grep -v "^ *test"; done
