# Issue 41's last two steps on one GPU (~2.5 minutes), then lab/gpu_issue37.sh, with every output
# packed into two files ($OUT/r41.tgz, $OUT/r37.tgz: a device call returns a limited number of files):
# a 10% slower copy of triton_fp8 against the original at the same path (--compare: "slower" on
# every case), and joules per call (--energy) with the clock watch's line.
# Usage (device machine, wheels in .whl incl. nvidia-ml-py, carry .whl): bash lab/gpu_issue41b.sh
source lab/h200_setup.sh
S=/tmp/s41 R=/tmp/r41 DB=/tmp/r41/p.db
mkdir -p $R /tmp/c41
python3 lab/standalone.py $S tests/slower/triton_fp8_plus10.py > /dev/null
LB="python3 eval.py --sandbox require --no-progress --db $DB --logs /tmp/l41"
cp submissions/triton_fp8.py /tmp/c41/triton_fp8.py
timeout -k 10 60 $LB --mode benchmark --budget 0.3 --submission /tmp/c41/triton_fp8.py --json $R/a.json > $R/a.log 2>&1
echo "original at /tmp/c41: exit $?"
cp $S/triton_fp8_plus10.py /tmp/c41/triton_fp8.py
timeout -k 10 60 $LB --mode benchmark --budget 0.3 --submission /tmp/c41/triton_fp8.py --json $R/b.json > $R/b.log 2>&1
echo "10% copy at /tmp/c41: exit $?"
python3 eval.py --db $DB --mode history --compare 1 2 > $R/compare.txt 2>&1; tail -14 $R/compare.txt
timeout -k 10 100 $LB --mode benchmark --energy --budget 0.5 --submission submissions/triton_bf16.py \
  --submission submissions/triton_fp8.py --json $R/energy.json > $R/energy.txt 2>&1; echo "energy: exit $?"
grep -h "energy\|clocks" $R/energy.txt | grep -v "│" | head -4 | cut -c1-200
python3 -c "import json; [print(r['submission'], r['case'], r.get('median_us'), r.get('energy_mj'), r.get('energy_err_mj'))
for r in json.load(open('$R/energy.json'))['rows'] if r.get('kind') == 'benchmark']"
tar czf "$OUT/r41.tgz" -C /tmp r41 l41 2>/dev/null
OUT=/tmp/o37 bash lab/gpu_issue37.sh
tar czf "$OUT/r37.tgz" -C /tmp o37 l2 l3 2>/dev/null
