"""The audit's marker: a process beside the profiled worker, in the same sandbox and under the same
profiler, that launches one small GPU kernel each time the parent asks. The profiler numbers the
kernels of both processes in one sequence (it runs them one at a time), so the marker's kernels
cut the worker's kernels into the calls the parent made, in the parent's order, without trusting
anything the worker does or labels (harness/audit.py reads the report).

`python -m harness.worker.marker FD ARGS...` (started by harness/launch.py): it starts the worker
(`python -m harness.worker ARGS...`, which never gets this channel) before it touches the GPU, then
  marker: {"op": "ready", "pid": its process id}   after a first kernel (the profiler's report shows
                                                   it: what follows is the worker's import)
  parent: {"op": "mark"} -> {"op": "marked"}   after its kernel finished
  parent: {"op": "exit"}   it waits for the worker and exits with the worker's status.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from harness.channel import WORKER_LIMIT, Channel, ChannelClosed


def main(argv: list[str]) -> int:
    fd, worker_args = int(argv[0]), argv[1:]
    worker = subprocess.Popen([sys.executable, "-m", "harness.worker", *worker_args],
                              pass_fds=[int(worker_args[0])])  # its channel; not this one
    channel = Channel(socket.socket(fileno=fd), WORKER_LIMIT)
    try:
        import torch

        flag = torch.empty(1, device="cuda") if torch.cuda.is_available() else None  # no kernel

        def mark() -> None:
            if flag is not None:
                flag.add_(1)  # one kernel
                torch.cuda.synchronize()

        mark()
        channel.send({"op": "ready", "pid": os.getpid()})
        while channel.recv()[0].get("op") == "mark":
            mark()
            channel.send({"op": "marked"})
    except (ChannelClosed, OSError):
        pass
    return worker.wait() % 256


if __name__ == "__main__":
    sys.stdout.flush()
    os.dup2(2, 1)  # standard output is the profiler's report (harness/launch.py, ReportCopy)
    sys.exit(main(sys.argv[1:]))
