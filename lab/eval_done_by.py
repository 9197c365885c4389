"""`eval.py` with the fence's wait for DONE chosen (harness/parent/fence.py `Fence.done_by`): "watcher"
(the parent's watcher kernel, harness/parent/watcher.py) or "stream" (the front end's wait), for
device runs that compare the two.
Usage: python3 lab/eval_done_by.py watcher|stream EVAL-ARGS..."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.api import fence, main  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("watcher", "stream"):
        sys.exit("usage: python3 lab/eval_done_by.py watcher|stream EVAL-ARGS...")
    fence.Fence.done_by = sys.argv[1]
    sys.exit(main(sys.argv[2:]))
