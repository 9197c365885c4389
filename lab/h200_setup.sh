# Sourced by every device script in lab/: strict shell, unbuffered Python, $OUT made, the carried wheels
# (.whl) installed, and start_mps / stop_mps.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-results/device}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site
# An MPS daemon of a script's own for its probes (eval.py starts one of its own): start_mps DIR makes this
# shell and its children its clients (its pipe and log folders under DIR) and starts it; stop_mps tells
# it to quit and drops the variables, so that a later eval.py starts its own.
start_mps() {
  export CUDA_MPS_PIPE_DIRECTORY=$1/pipe CUDA_MPS_LOG_DIRECTORY=$1/log; mkdir -p "$1/pipe" "$1/log"
  nvidia-cuda-mps-control -d
}
stop_mps() { echo quit | nvidia-cuda-mps-control; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; }
