"""What a child that runs submission code can read: the allow-list its sandbox is built from.

The sandbox's root starts empty (bubblewrap makes a fresh tmpfs, read-only once the view is built),
and `allowed_paths` lists everything then put into it, each with why; nothing else is there. What a
worker can read it can send out (in its failure reason, its log, its timings), and what it can open
it can lock: so no checkout (results/, logs, other submissions, .git, dot-files), no $HOME, no host
/tmp, no database wherever --db points, no /root, /home, /var or /run (issue 38). The groups:

  system      /usr and the top-level folders of the system's libraries and tools (/bin, /lib, ... as
              links into /usr where the host has them so), the dynamic loader's cache and
              configuration, /etc/alternatives (the links `cc` and `c++` resolve through), and a
              passwd and group file of one line each: the worker's own user (`getpass.getuser()`,
              which torch.compile's cache folder asks, needs one);
  python      the interpreter: its prefixes, and every entry of the worker's import path (asked of
              the interpreter itself: site-packages, editable installs, PYTHONPATH), except the
              checkout the harness runs from (whose code comes file by file, below);
  libraries   the folders LD_LIBRARY_PATH and the GPU toolkits' variables (CUDA_HOME, ROCM_PATH, ...)
              name;
  code        the harness's worker-side modules, found by following the `harness` imports of the
              child's entry files (for a worker: harness/worker/__main__.py, and reference.py, the
              task's public code that GPU MODE's submissions may import), with their compiled
              bytecode where it is there; the files a child needs besides (the cross-compile and
              vendor-profile children: the task file and its reference); what the operator shares
              with --share; the submission file itself;
  private     a tmpfs /tmp (the host's is not there), the worker's working folder /tmp/work (a tmpfs,
              or the host folder a profiler's report is collected from), /dev/shm (a tmpfs);
  devices     a minimal /dev (null, zero, random, tty, ...), its own /proc (its own PID namespace:
              its own processes only; /proc/keys and /proc/key-users read as empty);
  gpu         where the host has GPU device nodes (GPU_NODES): those nodes, /sys read-only (the driver
              reads its PCI devices and NUMA nodes there), ROCm's folders; the run's MPS view
              (harness/parent/mps.py) read-only; a profiler's install folder (Nsight Compute, rocprof) when it
              runs inside the sandbox.

A path of the checkout, $HOME, the submission's folder or a private path (the database, the logs)
that lies inside an allowed folder anyway (a checkout inside a Python prefix, a --db under /usr) is
covered: an empty read-only tmpfs over a folder, /dev/null over a file (with what it needs from
inside bound again on top). What is bound inside the private /tmp (a submission or a Python there)
sits in a read-only tmpfs of its own, so nothing can be added beside it. The standard library only
(harness/parent/launch.py imports this before torch)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import glob
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Optional, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
GPU_NODES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/kfd", "/dev/dri")
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives")
TOOLKIT_VARIABLES = ("CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "HIP_PATH", "TRITON_LIBCUDA_PATH", "TRITON_PTXAS_PATH")
ROCM_FOLDERS = ("/opt/rocm*", "/opt/amdgpu")
# The worker's entry files: the worker's script, and the task's public reference (`import reference`).
WORKER_CODE = (REPO_ROOT / "harness" / "worker" / "__main__.py", REPO_ROOT / "reference.py")
KINDS = ("ro", "rw", "dev", "devfs", "proc", "tmpfs", "symlink", "data", "hide", "holder")


@dataclasses.dataclass(frozen=True)
class Allowed:
    """One entry of the view: `path` inside the sandbox, why it is there, and what it is:
    ro / rw / dev: the host's `source` bound there (read-only / writable / a device node);
    devfs, proc: a minimal /dev, a /proc of the sandbox's own; tmpfs: an empty private folder;
    symlink: a link to `source`; data: a file holding `data`; hide: covers what a bound folder
    holds there (an empty read-only tmpfs, or /dev/null for a file); holder: a read-only tmpfs
    holding only the folders made for the entries below it (under the private, writable /tmp)."""

    path: Path
    why: str
    kind: str = "ro"
    source: Optional[Path] = None
    data: bytes = b""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(self.kind)
        if self.source is None and self.kind in ("ro", "rw", "dev"):
            object.__setattr__(self, "source", self.path)


def allowed_paths(submission: Path, *, code: Sequence[Path] = WORKER_CODE, files: Sequence[Path] = (),
                  tools: Sequence[str] = (), private: Sequence[Path] = (), scratch: Optional[Path] = None,
                  mps: Optional[tuple[Path, str]] = None) -> list[Allowed]:
    """The sandbox's whole view for a child that runs `submission`, in the order it is built (a
    folder before what is inside it). `code`: the child's entry files (their harness imports are
    followed); `files`: more read-only files or folders it needs (the task file, --share); `tools`: a
    profiler it runs under, by executable; `private`: paths that stay out of sight even inside an
    allowed folder; `scratch`: a host folder to be its working folder /tmp/work (else a tmpfs);
    `mps`: (the MPS view's folder, the pipe folder the worker looks for it at)."""
    entries = [*system_paths(), *python_paths(), *library_paths(),
               *(Allowed(p, "the harness's worker-side code" if p.is_relative_to(REPO_ROOT / "harness")
                         else "the task's public code (`import reference`), or the child's entry file")
                 for p in code_files(tuple(Path(c) for c in code))),
               *(Allowed(Path(f).resolve(), "a file the child needs (the task, or shared with --share)")
                 for f in files if os.path.exists(f)),
               Allowed(Path(submission).resolve(), "the submission"),
               Allowed(Path("/tmp"), "a private, empty /tmp", "tmpfs"),
               (Allowed(Path("/tmp/work"), "its working folder: a host folder the parent collects a report from", "rw",
                        Path(scratch)) if scratch else Allowed(Path("/tmp/work"), "its working folder", "tmpfs")),
               Allowed(Path("/dev"), "a minimal /dev", "devfs"),
               Allowed(Path("/dev/shm"), "a private, empty /dev/shm", "tmpfs"),
               Allowed(Path("/proc"), "the /proc of its own PID namespace", "proc"),
               # bwrap leaves /proc/sys writable where the sandbox's user maps to root: the host's
               # kernel settings (core_pattern runs a program as root on the next crash)
               Allowed(Path("/proc/sys"), "the kernel's settings: read-only", "ro", Path("/proc/sys")),
               *(Allowed(Path(p), "the host's SysRq trigger: covered", "ro", Path("/dev/null"))
                 for p in ("/proc/sysrq-trigger",) if os.path.exists(p)),
               *(Allowed(Path(p), "the host's keys' names and owners' quotas: read as empty", "ro", Path("/dev/null"))
                 for p in ("/proc/keys", "/proc/key-users") if os.path.exists(p)),
               *gpu_paths(), *(tool_paths(tools))]
    if mps is not None:
        entries.append(Allowed(Path(mps[1]), "the run's MPS daemon's sockets (harness/parent/mps.py)", "ro", Path(mps[0])))
    return _arranged(entries + _holders(entries), _covers(submission, private))


def _holders(entries: list[Allowed]) -> list[Allowed]:
    """What is bound inside the private /tmp (a submission or a Python there) sits in folders made for
    it; a read-only tmpfs holds them, so the worker cannot add files beside what it imports."""
    tmp, work = Path("/tmp"), Path("/tmp/work")
    tops = {Path(*e.path.resolve().parts[:3]) for e in entries if e.kind == "ro"
            and e.path.resolve().is_relative_to(tmp) and len(e.path.resolve().parts) > 3}
    return [Allowed(top, "holds the folders made for what is bound inside /tmp (read-only)", "holder")
            for top in sorted(tops) if top != work and not top.is_relative_to(work)]


def system_paths() -> list[Allowed]:
    """The system's programs and libraries (the C compiler Triton builds its launchers with, binutils,
    the GPU driver's user-space libraries), the loader's configuration, and the user's own name."""
    import grp
    import pwd

    found = []
    for folder in map(Path, SYSTEM_FOLDERS):
        if folder.is_symlink():  # a merged /usr: /bin -> usr/bin
            found.append(Allowed(folder, "the system's programs and libraries (a link, as on the host)", "symlink",
                                 Path(os.readlink(folder))))
        elif folder.is_dir():
            found.append(Allowed(folder, "the system's programs and libraries"))
    found += [Allowed(Path(p).resolve(), "the dynamic loader's cache and configuration; the links of `cc`, `c++`")
              for p in ETC_FILES if os.path.exists(p)]
    uid, gid = os.getuid(), os.getgid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = "worker"
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = user
    found += [Allowed(Path("/etc/passwd"), "its own user's name only", "data",
                      data=f"{user}:x:{uid}:{gid}::/tmp/work:/bin/sh\n".encode()),
              Allowed(Path("/etc/group"), "its own group's name only", "data", data=f"{group}:x:{gid}:\n".encode())]
    return found


def python_paths() -> list[Allowed]:
    """The interpreter: its prefixes, its executable and the worker's import path, less the checkout."""
    prefixes = {Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    found = [Allowed(p, "Python's prefix: the interpreter and its standard library") for p in sorted(prefixes)]
    found += [Allowed(Path(sys.executable), "the interpreter")]
    found += [Allowed(p, "an entry of the worker's import path") for p in worker_import_path()
              if _outside_checkout(p)]
    return found


def library_paths() -> list[Allowed]:
    """The folders the environment points the loader and the GPU toolkits at."""
    named = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    named += [os.environ[v] for v in TOOLKIT_VARIABLES if os.environ.get(v)]
    return [Allowed(Path(p), "a library or toolkit folder the environment names") for p in named
            if os.path.isabs(p) and os.path.exists(p) and _outside_checkout(Path(p))]


def gpu_nodes() -> list[str]:
    return [node for pattern in GPU_NODES for node in sorted(glob.glob(pattern))]


def gpu_paths() -> list[Allowed]:
    """Only where the host has a GPU: its device nodes, /sys (read-only), ROCm's folders."""
    nodes = gpu_nodes()
    if not nodes:
        return []
    found = [Allowed(Path(node), "the GPU's device node", "dev") for node in nodes]
    found.append(Allowed(Path("/sys"), "the GPU driver reads its PCI devices and NUMA nodes here (read-only)"))
    if "/dev/kfd" in nodes:  # (an NVIDIA machine may have /dev/dri too, for its display)
        found += [Allowed(Path(p), "ROCm's libraries and tools") for pattern in ROCM_FOLDERS
                  for p in sorted(glob.glob(pattern))]
    return found


def tool_paths(tools: Iterable[str]) -> list[Allowed]:
    """The install folder of each profiler that runs inside the sandbox (its executable's folder, or
    the folder above a bin/)."""
    found = []
    for tool in tools:
        exe = Path(tool).resolve()
        folder = exe.parent.parent if exe.parent.name == "bin" else exe.parent
        if exe.exists() and folder != Path("/"):
            found += [Allowed(folder, "the profiler that runs the child"),
                      Allowed(Path(tool), "the profiler's command")]
    return found


@functools.lru_cache(maxsize=None)
def _import_path(executable: str, pythonpath: str) -> tuple[Path, ...]:
    """The interpreter's import path as a worker gets it (no user site: a worker's HOME is its own
    empty folder), asked of the interpreter itself; this process's where it cannot answer."""
    ask = "import sys; print('\\0'.join(sys.path[1:]), end='')"  # [0]: the folder of the script it runs
    try:
        run = subprocess.run([executable, "-s", "-c", ask], capture_output=True, text=True, timeout=60, cwd="/",
                             env={**os.environ, "PYTHONPATH": pythonpath})
        entries = run.stdout.split("\0") if run.returncode == 0 else sys.path
    except (OSError, subprocess.SubprocessError):
        entries = sys.path
    return tuple(Path(p) for p in entries if p and os.path.isabs(p) and os.path.exists(p))


def worker_import_path() -> tuple[Path, ...]:
    return _import_path(sys.executable, os.environ.get("PYTHONPATH", ""))


@functools.lru_cache(maxsize=None)
def checkout() -> Optional[Path]:
    """The checkout this harness runs from; None where it is installed (its folder is then Python's
    library, site-packages, and no checkout's)."""
    import site
    import sysconfig

    libraries = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")} | set(site.getsitepackages())
    return None if REPO_ROOT in {Path(p).resolve() for p in libraries} else REPO_ROOT


def _outside_checkout(path: Path) -> bool:
    """Whether a folder the environment names may be bound whole: never `/`, the checkout, a folder
    inside it (its code comes file by file) or above it (an old-style editable install's entry)."""
    real, root = path.resolve(), checkout()
    if real == Path("/"):
        return False
    return root is None or not (real.is_relative_to(root) or root.is_relative_to(real))


@functools.lru_cache(maxsize=None)
def code_files(entries: tuple[Path, ...]) -> tuple[Path, ...]:
    """`entries` and the harness modules they import, directly or through each other (every import of
    `harness...` in a file, inside functions too: what may run), with the packages' __init__.py and
    each module's compiled bytecode where it is there."""
    todo, seen = [Path(e).resolve() for e in entries], []
    while todo:
        file = todo.pop()
        if file in seen or not file.is_file():
            continue
        seen.append(file)
        if file.suffix != ".py":
            continue
        try:
            tree = ast.parse(file.read_bytes(), str(file))
        except (SyntaxError, ValueError):
            continue
        for name in _imported_names(tree):
            parts = name.split(".")
            if parts[0] != "harness":
                continue
            for depth in range(1, len(parts) + 1):  # each package on the way, then the module
                base = REPO_ROOT.joinpath(*parts[:depth])
                todo += [p for p in (base / "__init__.py", base.with_suffix(".py")) if p.is_file()]
    cached = [Path(importlib.util.cache_from_source(str(f))) for f in seen if f.suffix == ".py"]
    return tuple(sorted(seen) + sorted(p for p in cached if p.is_file()))


def _imported_names(tree: ast.AST) -> list[str]:
    """Every module name an `import` in `tree` may load (`from a import b`: a, and a.b if a module)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _covers(submission: Path, private: Sequence[Path]) -> list[Path]:
    """Paths to keep out of sight wherever an allowed folder holds them: the checkout, $HOME, the
    submission's folder, the private paths (a database with its journal files)."""
    found = [p for p in (checkout(), Path.home(), Path(submission).resolve().parent) if p is not None]
    for path in map(Path, private):
        found += [Path(f"{path}{tail}") for tail in ("", "-journal", "-wal", "-shm")]
    return [p.resolve() for p in found if os.path.lexists(p)]


def _arranged(entries: list[Allowed], covers: list[Path]) -> list[Allowed]:
    """The entries in the order bwrap builds them (a folder before what is inside it; a later mount
    inside an earlier one is on top of it), each host path bound at its real place, and also at the
    name it was given where that is a link the view does not hold; without what an earlier binding
    shows already; with `covers` hidden where a bound folder shows them."""
    real, aliases = [], set()
    for entry in entries:
        if entry.kind == "ro" and entry.source == entry.path:
            resolved = entry.path.resolve()
            real.append(dataclasses.replace(entry, path=resolved, source=resolved))
            if resolved != entry.path:  # reached through a link: the name too, unless the view shows it
                aliases.add(len(real))
                real.append(dataclasses.replace(entry, source=resolved))
        else:
            real.append(entry)
    order = sorted(range(len(real)), key=lambda i: len(real[i].path.parts))  # (stable within a depth)
    ordered = [(real[i], i in aliases) for i in order if real[i].path != Path("/")]
    kept: list[Allowed] = []
    for entry, alias in ordered:
        if any(k.path == entry.path for k in kept):
            continue  # one mount per place: the first
        if entry.kind == "ro" and (_shown(entry.path, kept, None if alias else entry.source)
                                   or _through_link(entry.path, kept)):
            continue
        kept.append(entry)
    hidden = [Allowed(c, "out of sight inside an allowed folder (the checkout, $HOME, the submission's folder, "
                         "or a private path)", "hide") for c in covers if _shown(c, kept)]
    if not hidden:
        return kept
    return _arranged([*entries, *hidden], [])  # what is needed inside a cover is bound again on top of it


def _view_of(path: Path, entries: list[Allowed]) -> Optional[tuple[Allowed, Path]]:
    """The deepest entry at or above `path`, and where `path` is below it."""
    best = None
    for entry in entries:
        if path.is_relative_to(entry.path) and (best is None or len(entry.path.parts) >= len(best[0].path.parts)):
            best = (entry, path.relative_to(entry.path))
    return best


def _shown(path: Path, entries: list[Allowed], source: Optional[Path] = None) -> bool:
    """Whether an ro bind in `entries` shows `path` (as `source`, if given) with no cover between."""
    view = _view_of(path, entries)
    if view is None or view[0].kind != "ro" or view[0].source == Path("/dev/null"):
        return False
    return source is None or view[0].source / view[1] == source


def _through_link(path: Path, entries: list[Allowed]) -> bool:
    """Whether `path` lies below one of the view's links (it is reached through it, not made there)."""
    return any(e.kind == "symlink" and path.is_relative_to(e.path) and path != e.path for e in entries)
