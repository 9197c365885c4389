"""Tries: slow down the files after it through the run's MPS daemon. At import, from inside the sandbox,
it runs `nvidia-cuda-mps-control` against the pipe folder CUDA_MPS_PIPE_DIRECTORY names (the run's private
daemon, harness/parent/mps.py): `get_server_list`, then `set_active_thread_percentage <pid> 10` for every server
listed (every later client of that server, i.e. every later worker, would get 10% of the SMs) and
`set_default_active_thread_percentage 10` (servers started later); each command is its own process with a
5 s limit (killed past it; it never hangs the import), failures are ignored, and what it could do is
printed to its log (the folder's listing, each command's exit status and output). Then it computes
honestly (the bundled triton_bf16 kernel).
Must get: the commands cannot reach the daemon whose server the later files' workers use (its control
socket is not visible in the sandbox), and the files after it in the same run rank as without it.
(A CUDA process joins MPS through that same control socket, nvidia-cuda-mps-control(1), so a sandbox
that hides it from the worker also takes the worker off MPS, and off the fence, unless the worker has a
daemon of its own; and where the sandbox binds the run's one pipe folder, control socket included, as
harness/parent/launch.py's `bwrap_command` did when this file was written, expect the commands to reach it:
docs/threat-model.md, "Closed in the fence". Its log says which.) On the CPU, or without the variable: nothing to
reach; passes."""
import importlib.util
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "bundled_bf16", Path(__file__).resolve().parents[2] / "submissions" / "triton_bf16.py")
_bundled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bundled)
PERCENT = 10
LIMIT_S = 5.0


def _control(exe, pipe, command):
    """(exit status or why none, output) of one control command; never waits past LIMIT_S."""
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                                    env={**os.environ, "CUDA_MPS_PIPE_DIRECTORY": pipe}, start_new_session=True)
        except OSError as exc:
            return f"not started ({exc})", ""
        try:
            proc.stdin.write(command.encode() + b"\n")
            proc.stdin.close()
        except OSError:
            pass
        try:
            status = proc.wait(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
            status = f"killed after {LIMIT_S:g} s"
        out.seek(0)
        return status, out.read(4096).decode(errors="replace").strip()


def _throttle():
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
    exe = shutil.which("nvidia-cuda-mps-control")
    print(f"zoo: CUDA_MPS_PIPE_DIRECTORY={pipe!r}, nvidia-cuda-mps-control at {exe!r}", flush=True)
    if not pipe or not exe:
        return
    try:
        print(f"zoo: the pipe folder holds {sorted(os.listdir(pipe))}", flush=True)
    except OSError as exc:
        print(f"zoo: the pipe folder cannot be listed: {exc}", flush=True)
    commands = ["get_server_list"]
    status, output = _control(exe, pipe, commands[0])
    print(f"zoo: get_server_list -> {status}: {output!r}", flush=True)
    servers = [word for word in output.split() if word.isdigit()] if status == 0 else []
    commands = [f"set_active_thread_percentage {pid} {PERCENT}" for pid in servers]
    commands.append(f"set_default_active_thread_percentage {PERCENT}")
    for command in commands:
        status, output = _control(exe, pipe, command)
        print(f"zoo: {command} -> {status}: {output!r}", flush=True)


try:
    _throttle()
except Exception as exc:  # whatever happens, the file goes on honestly
    print(f"zoo: the MPS commands failed: {type(exc).__name__}: {exc}", flush=True)


def custom_kernel(data):
    return _bundled.custom_kernel(data)
