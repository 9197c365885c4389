"""The untrusted side of the trust boundary: code that runs inside the sandbox, in the same process
as a submission (the worker loop and its timer).

It imports only the wire modules it shares with the parent (harness/worker/channel.py,
harness/worker/shared_memory.py) and harness/worker/compat.py (the `task` / `utils` modules competition files
import); nothing the parent's verdict depends on (harness/task/verdict.py, harness/parent/engine.py, the
task's check) is imported here.
"""
