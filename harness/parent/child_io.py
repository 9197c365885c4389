"""A child process's environment and output: what variables a sandboxed child inherits
(`child_env`), the copy of its output into a capped log (`StreamCopy`), the limits it runs under, and
`run_captured` for the cross-compile and vendor-profile children."""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Optional

from harness.parent.allowlist import REPO_ROOT
from harness.parent.seccomp import _KEYCTL_HERE, _LIBC, SandboxCommand

# What a child that runs submission code inherits of this process's environment: the GPU stack's and
# Python's own variables, by name or prefix, and SUBMISSION_* (a submission's own knobs, e.g.
# triton_mxfp4.py's SUBMISSION_MXFP4_QK_DOT_SCALED). Nothing else, and none of those whose name says
# it holds a secret (NVIDIA_API_KEY, TORCH_HUB_TOKEN, ...): an operator's tokens stay here.
ENV_NAMES = {"PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR"}
ENV_PREFIXES = ("LC_", "PYTHON", "LD_", "CUDA", "NVIDIA_", "NV_", "HIP_", "ROCM", "ROCR_", "HSA_", "AMD_", "GPU_",
                "TRITON_", "TORCH", "PYTORCH_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "NCCL_", "CUBLAS_", "CUDNN_",
                "SUBMISSION_")
ENV_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE)


def child_env() -> dict[str, str]:
    """The environment of a child that runs submission code: this one's GPU-stack and Python variables
    (ENV_NAMES, ENV_PREFIXES), with the harness first on the import path and no bytecode written
    (the filesystem is read-only inside the sandbox)."""
    env = {k: v for k, v in os.environ.items()
           if (k in ENV_NAMES or k.startswith(ENV_PREFIXES)) and not ENV_SECRET.search(k)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class StreamCopy:
    """Copies what a child writes to a pipe into a file the sandbox cannot see, up to `limit` bytes.

    A pipe, not a file the child holds open: a file it can write is one it can also grow on disk
    past any size limit (fallocate with KEEP_SIZE reserves blocks without changing the size) and
    rewrite at will. Past the limit, `drain` keeps reading and drops the rest (a profiler's report:
    the profiler must never block; the copy is marked `overflowed`); otherwise the pipe is closed
    after a closing line, and the child's next write fails (a worker's log: "Broken pipe").

    The profiler's report: the worker shares the profiler's sandbox and could rewrite any file
    there; it can only add lines to the pipe, which harness/parent/audit.py reads strictly (what it may
    still do with them: harness/parent/audit.py's docstring)."""

    def __init__(self, stream, path: Path, limit: int, drain: bool):
        import threading

        self.path, self.limit, self.drain = path, limit, drain
        self.overflowed, self.complete = False, False
        self._thread = threading.Thread(target=self._copy, args=(stream,), daemon=True)
        self._thread.start()

    def _copy(self, stream) -> None:
        written, out = 0, None
        with stream:
            try:
                out = open(self.path, "wb")
                for chunk in iter(lambda: stream.read1(1 << 16), b""):
                    if written + len(chunk) > self.limit:
                        self.overflowed = True
                        if self.drain:
                            continue
                        out.write(chunk[:self.limit - written])
                        out.write(f"\n[cut here: the harness keeps at most {self.limit} bytes of a worker's output]\n"
                                  .encode())
                        return
                    out.write(chunk)
                    out.flush()  # on disk as it comes: a log can be followed (tail -f) while the worker runs
                    written += len(chunk)
            except OSError:  # the file cannot be written (a full disk): the stream is drained or closed all the same
                self.overflowed = True
                while self.drain and stream.read1(1 << 16):
                    pass
            finally:
                if out is not None:
                    out.close()

    def finish(self, timeout: float = 60) -> None:
        """Wait for the end of the stream; `complete` says whether it came (else it is cut short)."""
        self._thread.join(timeout)
        self.complete = not self._thread.is_alive()


REPORT_LIMIT = 256 << 20  # bytes of a profiler's report the parent keeps
LOG_LIMIT = 64 << 20  # bytes kept of a worker's output (its log), and of any file it writes: past it, writes fail


def _limits(file_limit: int = LOG_LIMIT) -> None:
    """In the child, before exec: no core dumps, files capped at `file_limit` bytes, a session keyring
    of its own, and first in line for the out-of-memory killer (so a worker that eats the host's
    memory dies, not the parent)."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))
    # A fresh, empty session keyring (KEYCTL_JOIN_SESSION_KEYRING): nothing the child runs possesses
    # the operator's keys, which a kernel service that takes a key by its serial (AF_ALG's) would use
    # without any keyring system call.
    if _KEYCTL_HERE is not None:
        _LIBC.syscall(_KEYCTL_HERE, 1, None)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


def run_captured(command: list[str], env: dict, cwd: Path, folder: Path, timeout: Optional[float],
                 out_limit: int, file_limit: int = LOG_LIMIT, box: Optional[SandboxCommand] = None) -> tuple[int, bytes, bool, str]:
    """Run a child that runs submission code (capped as a worker is: `_limits`, its files at
    `file_limit` bytes), its stdout and stderr copied through pipes into files of `folder` (one the
    sandbox cannot see; pipes, not files it holds open, which it could grow on disk past any size
    limit, and not the parent's memory). (Exit code, at most `out_limit` bytes of stdout, whether
    more came, the end of stderr.) Past `timeout` its whole process group is killed and
    subprocess.TimeoutExpired raised. `box`: the sandbox `command` starts with (its descriptors are
    passed, then closed)."""
    out_path, err_path = folder / "stdout.bin", folder / "stderr.txt"
    (out_read, out_write), (err_read, err_write) = os.pipe(), os.pipe()
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out_write, stderr=err_write, env=env,
                                cwd=cwd, start_new_session=True, preexec_fn=functools.partial(_limits, file_limit),
                                pass_fds=box.fds if box else ())
    except BaseException:
        os.close(out_read)
        os.close(err_read)
        raise
    finally:
        os.close(out_write)
        os.close(err_write)
        if box:
            box.close()
    out = StreamCopy(open(out_read, "rb"), out_path, out_limit, drain=True)
    err = StreamCopy(open(err_read, "rb"), err_path, LOG_LIMIT, drain=True)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.wait()
        raise
    finally:
        out.finish(timeout=5)
        err.finish(timeout=5)
    with open(out_path, "rb") as f:
        raw = f.read(out_limit)
    with open(err_path, "rb") as f:
        f.seek(max(0, err_path.stat().st_size - 8192))
        tail = f.read().decode("utf-8", "replace")
    return code, raw, out.overflowed, tail
