# Issue 41's joules per call on one GPU: --energy (a burst of each case's calls back to back after its
# timed calls, the energy counter read around it: harness/parent/energy.py) for the three bundled Triton
# files and tests/zoo_gpu/idles_through_burst.py, which must get no figure (one seed; ENERGY_SEEDS="a b" runs each and shows them side by side: does a case's figure
# repeat?), then a table per case of mJ per call, its ± bound, the ranked median and the note. Usage
# (device machine, wheels in .whl incl. nvidia-ml-py, carry .whl): bash lab/gpu_energy.sh (~2.5 min a seed).
source lab/h200_setup.sh
python3 -c "import pynvml; pynvml.nvmlInit(); print('NVML', pynvml.nvmlSystemGetDriverVersion())" || echo "no NVML"
W=/tmp/energy; mkdir -p $W
python3 lab/standalone.py /tmp/se tests/zoo_gpu/idles_through_burst.py > /dev/null  # (must get no figure)
start=$(date +%s)
for seed in ${ENERGY_SEEDS:-4201}; do
  timeout -k 10 200 python3 eval.py --sandbox require --no-progress --db $W/energy.db --logs $W/logs --mode benchmark \
    --energy --budget 0.3 --seed $seed --submission submissions/triton_bf16.py --submission submissions/triton_fp8.py \
    --submission submissions/triton_mxfp4.py --submission /tmp/se/idles_through_burst.py --json $W/energy_$seed.json > $W/energy_$seed.txt 2>&1
  echo "seed $seed: exit $? at $(( $(date +%s) - start )) s"; grep -h "clocks\|energy" $W/energy_$seed.txt | grep -v "│" | head -4
done
tar czf "$OUT/energy.tgz" -C /tmp energy 2>/dev/null
python3 - $W/energy_*.json <<'PY'
import json, sys
nan = float("nan")
runs = [[r for r in json.load(open(p))["rows"] if r["kind"] == "benchmark"] for p in sys.argv[1:]]
print(f"{'file':14} {'case':12} " + "  ".join(f"{'mJ/call':>9} {'±':>6} {'µs':>8}" for _ in runs) + "  note")
for rows in zip(*runs):
    name = rows[0]["submission"].split("/")[-1].removesuffix(".py")[:14]
    case = rows[0]["case"].replace("batchsize: ", "b").replace("; qseqlen: 1; kvseqlen: ", "x")[:12]
    cells = [f"{r.get('energy_mj') or nan:9.3f} {r.get('energy_err_mj') or nan:6.3f} {r.get('median_us') or nan:8.1f}"
             for r in rows]
    print(f"{name:14} {case:12} " + "  ".join(cells) + "  " + " | ".join(r.get("energy_note") or "" for r in rows)[:110])
for rows in zip(*runs):
    if rows[0]["case"] == runs[0][0]["case"]:
        print(f"{rows[0]['submission'].split('/')[-1][:14]:14} geomean mJ   "
              + "  ".join(f"{r.get('geomean_energy_mj') or nan:9.3f}" for r in rows))
PY
