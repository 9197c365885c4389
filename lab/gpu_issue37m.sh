# Issue 37 in one device call (~8 min, one GPU): lab/placement_probe.py on triton_fp8 and triton_mxfp4
# at 4x1k, each in two processes (does placement or the process move a small case's time?), then
# NO_H=1 lab/gpu_issue37i.sh (one-file wall, two back-to-back runs, issue 41's ties and --compare) and
# lab/gpu_issue37k.sh (CUPTI beside the bundled files, torch_loop's walls).
# Usage (device machine, wheels in .whl, carry .whl): bash lab/gpu_issue37m.sh
source lab/h200_setup.sh
P=/tmp/r37m; mkdir -p $P
for f in triton_fp8 triton_mxfp4; do
  for proc in 1 2; do
    timeout -k 10 60 python3 lab/placement_probe.py submissions/$f.py > $P/place_${f}_$proc.txt 2>&1
    echo "placement $f process $proc: exit $?"; tail -1 $P/place_${f}_$proc.txt | cut -c1-200
  done
done
tar czf "$OUT/r37m.tgz" -C /tmp r37m 2>/dev/null
NO_H=1 bash lab/gpu_issue37i.sh 2>&1 | tail -45
echo ======
bash lab/gpu_issue37k.sh 2>&1 | tail -50
