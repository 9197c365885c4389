"""A sandboxed child sees only its allow-list (harness/parent/allowlist.py; issue 38): walked from `/` inside
the sandbox, every path there lies on the list (or is a folder made to hold one of its entries), and
canaries planted in the checkout, in $HOME, in the host's /tmp, beside the submission and beside
another run's database cannot be opened. One sandboxed interpreter without torch: well under a
second. On a GPU machine the same test covers the GPU's entries (device nodes, /sys)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT

from harness.parent.allowlist import REPO_ROOT, WORKER_CODE, allowed_paths, code_files
from harness.parent.launch import bwrap_command, child_env, find_bwrap, sandbox_problem

WHY = sandbox_problem()
if WHY is not None and os.environ.get("CI"):
    raise RuntimeError(f"CI must run the sandboxed path, but: {WHY}")
needs_sandbox = pytest.mark.skipif(WHY is not None, reason=f"no OS sandbox here: {WHY}")

# What bwrap's --dev holds besides the GPU's nodes.
DEV_STANDARD = {"core", "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty",
                "urandom", "zero", "console"}

# Runs inside the sandbox (python -S: no site, nothing imported but the standard library's core).
WALK = r"""
import json, os, sys
entries = json.loads(sys.argv[1])
canaries = json.loads(sys.argv[2])
everything = [e["path"] for e in entries]
folders = [e["path"] for e in entries if e["kind"] in ("tmpfs", "holder")]  # walked: empty but what holds entries
allowed = [p for p in everything if p not in folders]
hidden = [e["path"] for e in entries if e["kind"] == "hide"]

def within(path, roots):
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)

def above(path):  # a folder bwrap made to hold an entry
    return path in folders or any(r.startswith(path.rstrip("/") + "/") for r in everything)

seen, outside, missing = 0, [], [p for p in everything if not os.path.lexists(p)]
stack = ["/"]
while stack:
    folder = stack.pop()
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        seen += 1
        if within(path, allowed):
            continue
        if above(path) and os.path.isdir(path) and not os.path.islink(path):
            stack.append(path)
        else:
            outside.append(path)
def holds(path):  # a cover shows nothing: an empty folder, or a file that reads empty or not at all
    try:
        return os.listdir(path) if os.path.isdir(path) else open(path, "rb").read()
    except OSError:
        return False

not_empty = [p for p in hidden if holds(p)]
processes = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
commands = [open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")[0].decode() for p in processes]
opened = []
for path in canaries:
    try:
        with open(path, "rb") as f:
            opened.append((path, f.read(64).decode(errors="replace")))
    except OSError:
        pass
# Writable: any listed path but the private ones, and every kernel setting (/proc/sys: where the
# sandbox's user maps to root, a writable one changes the host)
private = [e["path"] for e in entries if e["kind"] in ("tmpfs", "rw", "devfs", "dev")]
nulls = [e["path"] for e in entries if e["null"]]  # covered by /dev/null: writes go nowhere
writable = [p for p in allowed + hidden + ["/proc/sysrq-trigger"]
            if os.path.lexists(p) and not within(p, private) and p not in nulls and os.access(p, os.W_OK)]
for folder, _, files in os.walk("/proc/sys"):
    writable += [os.path.join(folder, f) for f in files if os.access(os.path.join(folder, f), os.W_OK)]
print(json.dumps({"seen": seen, "outside": outside, "missing": missing, "not_empty": not_empty,
                  "commands": commands, "dev": sorted(os.listdir("/dev")), "opened": opened,
                  "writable": writable}))
"""


def walk(submission: Path, private: list[Path], canaries: list[Path]) -> dict:
    entries = allowed_paths(submission, private=private)
    listed = json.dumps([{"path": str(e.path), "kind": e.kind, "null": e.source == Path("/dev/null")}
                         for e in entries])
    box = bwrap_command(find_bwrap(), submission, private)
    try:
        run = subprocess.run(box + [sys.executable, "-S", "-c", WALK, listed, json.dumps([str(c) for c in canaries])],
                             pass_fds=box.fds, env=child_env(), capture_output=True, text=True, timeout=60)
    finally:
        box.close()
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


@pytest.fixture
def planted(tmp_path):
    """Canaries, each holding a token: in the checkout (a dot-file at its root, a database in its
    results/ beside the run's own, which is private), in $HOME, in the host's /tmp, and beside the
    submission (another competitor's file). Yields (submission, private paths, canaries, token)."""
    token = f"CANARY-{os.getpid()}-{os.urandom(4).hex()}"
    (ROOT / "results").mkdir(exist_ok=True)
    runs = Path(tempfile.mkdtemp(prefix="test-allowlist-", dir=ROOT / "results"))
    home = Path(tempfile.mkdtemp(prefix=".mla-eval-canary-", dir=Path.home()))
    dot = ROOT / f".env.canary-{os.getpid()}"
    subs = tmp_path / "subs"
    subs.mkdir()
    submission = subs / "mine.py"
    shutil.copy(ROOT / "submissions" / "torch_batched.py", submission)
    canaries = [dot, runs / "other.db", runs / "runs.db", home / "token.txt", tmp_path / "token.txt",
                subs / "competitor.py", Path(tempfile.gettempdir()) / f"mla-eval-canary-{os.getpid()}"]
    try:
        for canary in canaries:
            canary.write_text(token)
        yield submission, [runs / "runs.db", runs, tmp_path / "logs"], canaries, token
    finally:
        for canary in canaries:
            canary.unlink(missing_ok=True)
        shutil.rmtree(runs, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


@needs_sandbox
def test_the_sandbox_holds_only_the_allow_list(planted):
    submission, private, canaries, token = planted
    found = walk(submission, private, canaries)
    assert found["outside"] == [], f"readable off the allow-list: {found['outside'][:20]}"
    assert found["missing"] == [], f"listed but not there: {found['missing']}"
    assert found["opened"] == [], f"canaries read: {found['opened']}"
    assert found["not_empty"] == []
    assert found["writable"] == [], f"writable in the sandbox: {found['writable'][:20]}"
    assert token not in json.dumps(found)
    # its own processes only (bwrap's and the walker), no device node but bwrap's own and the GPU's
    assert len(found["commands"]) <= 3 and all(c.endswith(("bwrap", "python", Path(sys.executable).name))
                                               for c in found["commands"]), found["commands"]
    gpu = {e.path.name for e in allowed_paths(submission) if e.kind == "dev" and e.path.parent == Path("/dev")}
    assert set(found["dev"]) <= DEV_STANDARD | gpu, found["dev"]


def test_the_allow_list_holds_no_checkout_home_tmp_or_database(tmp_path):
    db = tmp_path / "results" / "runs.db"
    entries = allowed_paths(ROOT / "submissions" / "torch_batched.py", private=[db, db.parent, tmp_path / "logs"])
    bound = {e.source.resolve() for e in entries if e.kind in ("ro", "rw", "dev")}
    forbidden = {Path("/"), REPO_ROOT, Path.home().resolve(), Path("/tmp").resolve(), Path("/root"), Path("/home"),
                 Path("/var"), Path("/run"), Path("/etc"), db.parent}
    assert not bound & forbidden
    for folder in bound:  # no bound folder holds the checkout, $HOME or the database
        assert not any(f.is_relative_to(folder) for f in (REPO_ROOT, Path.home().resolve(), db)), folder
    code = {str(p.relative_to(REPO_ROOT)) for p in bound if p.is_relative_to(REPO_ROOT)}
    assert code == {str(p.relative_to(REPO_ROOT)) for p in code_files(WORKER_CODE)} | {"submissions/torch_batched.py"}
    parent_side = {"engine", "store", "run", "cli", "sandbox", "launch", "config", "audit", "pool", "report",
                   "selftest", "popcorn"}
    assert not {Path(p).stem for p in code} & parent_side, code
    why = {e.path: e.why for e in entries}
    assert all(why.values())  # every entry says why it is there


@needs_sandbox
def test_share_shows_a_file_and_refuses_the_checkout_home_or_results(tmp_path):
    """--share: public code a file loads by path (the GPU zoo loads submissions/triton_bf16.py)."""
    from harness.config import UsageError
    from harness.cli.flags import private_paths, shared_paths

    private = private_paths(str(tmp_path / "results" / "r.db"), str(tmp_path / "logs"))
    shared = ROOT / "submissions" / "triton_bf16.py"
    assert shared_paths([str(shared)], private) == (shared,)
    for wrong in (ROOT, ROOT / "submissions" / "missing.py", Path.home(), tmp_path):
        with pytest.raises(UsageError):
            shared_paths([str(wrong)], private)
    box = bwrap_command(find_bwrap(), ROOT / "submissions" / "torch_batched.py", [], files=[shared])
    try:
        run = subprocess.run(box + [sys.executable, "-S", "-c", f"print(len(open({str(shared)!r}).read()) > 0)"],
                             pass_fds=box.fds, env=child_env(), capture_output=True, text=True, timeout=60)
    finally:
        box.close()
    assert run.stdout.strip() == "True", run.stderr[-500:]


def test_no_secret_reaches_a_child_through_an_allowed_prefix(monkeypatch):
    """The GPU stack's variables pass by prefix (CUDA*, NVIDIA_, TORCH, ...); a token under one of
    those prefixes does not."""
    secrets = {"NVIDIA_API_KEY": "nvapi-x", "TORCH_HUB_TOKEN": "t", "CUDA_TOKEN": "c", "HIP_SECRET": "s",
               "PYTHON_KEYRING_PASSWORD": "p", "TRITON_AUTH": "a"}
    kept = {"CUDA_VISIBLE_DEVICES": "0", "NVIDIA_VISIBLE_DEVICES": "all", "TORCH_CUDA_ARCH_LIST": "9.0",
            "SUBMISSION_MXFP4_QK_DOT_SCALED": "1"}
    for name, value in {**secrets, **kept}.items():
        monkeypatch.setenv(name, value)
    env = child_env()
    assert not set(secrets) & set(env) and all(env[k] == v for k, v in kept.items())
