import os
import resource
import sys

# Under the audit's profiler the sandbox's file-size cap is the profiler's (its temporary report
# in the private /tmp can pass the worker's cap); the worker takes its own cap back here, before any
# submission code runs (harness/parent/launch.py, start_worker).
if len(sys.argv) > 5:
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[5]), int(sys.argv[5])))

from harness.worker.loop import entry  # noqa: E402

# The worker's output goes to its log (standard error): under the audit's profiler, standard
# output carries the profiler's report (harness/parent/launch.py, StreamCopy).
sys.stdout.flush()
os.dup2(2, 1)
entry(sys.argv[1:5])
