# Sourced by the device scripts of issue 16 (lab/h200_kernels.sh, h200_bf16_launch.sh,
# h200_issue16.sh): strict shell, unbuffered Python, $OUT made, and the carried wheels (.whl) installed.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-results/device}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site
