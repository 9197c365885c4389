"""A private MPS daemon for the run: the parent's fence (harness/parent/fence.py) needs the parent's and the
workers' streams in one hardware context, which NVIDIA's Multi-Process Service gives.

`start()` runs `nvidia-cuda-mps-control -d` with pipe and log folders of the run's own (0700, removed
at exit, when the daemon is told to quit) and points this process and its children at it through
CUDA_MPS_PIPE_DIRECTORY. It must run before this process creates a CUDA context: a context made
earlier is no MPS client. A daemon the environment already names is used as it is (and left running).
A daemon left by a run that was killed (it detaches; only a normal exit quits it) is told to quit by
the next run's `start()` (`quit_orphans`): its server would keep the GPU from the new one.

A sandboxed worker never sees the pipe folder itself: `worker_view()` makes it a folder of its own
holding hard links to the daemon's sockets, bound where the pipe folder is named (harness/parent/launch.py),
and `close_view()` empties it once the worker's CUDA context is made (after the fence's null calls,
before the submission is imported): the submission cannot then reach the daemon's control socket,
so it cannot quit the daemon, end other clients or change their share of the GPU.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional


PIPE = "CUDA_MPS_PIPE_DIRECTORY"
LOG = "CUDA_MPS_LOG_DIRECTORY"
PERSISTING_L2 = "CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT"
ROOT = "MLA_EVAL_MPS_ROOT"  # the folder of the run's own daemon, for its evaluator processes (worker_view)
_STATE: dict[str, Optional[str]] = {}
PREFIX = "mla-eval-mps-"  # a run's daemon folder, in the temporary folder
OWNER = "owner"           # in it: the pid of the run that started the daemon


def pid_alive(pid: int) -> bool:
    """Whether process `pid` may still run (a pid that cannot be checked counts as alive)."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, ValueError):
        return True
    return True


def start() -> Optional[str]:
    """Start (or adopt) the daemon; None when it runs, else why not (one line). Idempotent."""
    if "why" in _STATE:
        return _STATE["why"]
    _STATE["why"] = why = _start()
    return why


def _start() -> Optional[str]:
    exe = shutil.which("nvidia-cuda-mps-control")
    if exe is None:
        return "no MPS (nvidia-cuda-mps-control not found)"
    given = os.environ.get(PIPE)
    if given:
        if not (Path(given) / "control").exists():
            return f"no MPS daemon at {PIPE}={given}"
        root = os.environ.get(ROOT)
        if root and Path(given) == Path(root) / "pipe":  # the run's own, started by the process above this one
            _STATE["root"] = root
        return None
    quit_orphans(exe)
    root = Path(tempfile.mkdtemp(prefix=PREFIX))
    (root / OWNER).write_text(str(os.getpid()))
    pipe, log = root / "pipe", root / "log"
    pipe.mkdir(mode=0o700)
    log.mkdir(mode=0o700)
    # No client may set L2 aside for persisting lines (a KV cache kept in L2 through the fence's
    # flush): under MPS that limit is the daemon's, fixed when it starts.
    env = {**os.environ, PIPE: str(pipe), LOG: str(log), PERSISTING_L2: "0"}
    try:
        started = subprocess.run([exe, "-d"], env=env, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(root, ignore_errors=True)
        return f"no MPS (the daemon did not start: {exc})"
    deadline = time.monotonic() + 5
    while started.returncode == 0 and not (pipe / "control").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    if started.returncode != 0 or not (pipe / "control").exists():
        shutil.rmtree(root, ignore_errors=True)
        text = " ".join((started.stderr or started.stdout or "").split())[:200]
        return f"no MPS (the daemon did not start{': ' + text if text else ''})"
    os.environ[PIPE], os.environ[LOG], os.environ[ROOT] = str(pipe), str(log), str(root)
    _STATE["root"] = str(root)
    _STATE["stop"] = (exe, env, root)
    atexit.register(stop)
    return None


def stop() -> None:
    """Tell the daemon this process started to quit (nothing when it started none); also at exit."""
    args = _STATE.pop("stop", None)
    if args:
        _stop(*args)


def quit_orphans(exe: str, folder: Optional[str] = None) -> list[Path]:
    """Tell every daemon that an earlier run started and left behind (its run was killed: the daemon
    detaches, and only a normal exit quits it) to quit, and remove its folder; the folders found. A
    left daemon's server keeps the GPU, so the next run's clients could wait on it. A daemon whose
    run still lives (another run on this machine), or whose folder names no run, is left alone."""
    found = []
    for root in sorted(Path(folder or tempfile.gettempdir()).glob(PREFIX + "*")):
        if not (_own_folder(root) and _own_folder(root / "pipe")):  # (another user's, or a link: not ours)
            continue
        try:
            owner = int((root / OWNER).read_text())
        except (OSError, ValueError):
            continue
        if pid_alive(owner):
            continue
        found.append(root)
        if (root / "pipe" / "control").exists():
            env = {**os.environ, PIPE: str(root / "pipe"), LOG: str(root / "log")}
            try:
                quit_ = subprocess.run([exe], input="quit\n", env=env, capture_output=True, text=True, timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                continue  # (its folder stays: the only way to reach it; the next run tries again)
            if quit_.returncode != 0:
                continue
        shutil.rmtree(root, ignore_errors=True)
    return found


def _own_folder(path: Path) -> bool:
    """A real folder (not a link) of this user's."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()


def worker_view() -> Optional[Path]:
    """A folder of hard links to the run's daemon's sockets, for one worker to find as its pipe
    folder; None when the run started no daemon of its own (or the links cannot be made)."""
    root, pipe = _STATE.get("root"), os.environ.get(PIPE)
    if not root or not pipe:
        return None
    views = Path(root) / "views"
    views.mkdir(mode=0o700, exist_ok=True)
    view = Path(tempfile.mkdtemp(dir=views))
    try:
        for entry in os.scandir(pipe):
            os.link(entry.path, view / entry.name, follow_symlinks=False)
    except OSError:
        shutil.rmtree(view, ignore_errors=True)
        return None
    return view


def close_view(view: Path, remove: bool = False) -> None:
    """Remove the view's links; `remove`: the folder too (once its worker is gone: a running one's
    sandbox has it bound)."""
    if remove:
        shutil.rmtree(view, ignore_errors=True)
        return
    try:
        entries = list(os.scandir(view))
    except OSError:
        return
    for entry in entries:
        try:
            os.unlink(entry.path)
        except OSError:
            pass


def _stop(exe: str, env: dict, root: Path) -> None:
    """Tell the daemon to quit, from a detached shell: the daemon ends its server once this process
    (a client) is gone, so nothing here waits for it; the shell then removes the run's folders."""
    try:
        subprocess.Popen(["sh", "-c", 'echo quit | "$0"; sleep 1; rm -rf "$1"', exe, str(root)], env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    except OSError:
        pass
