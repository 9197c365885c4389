"""The run's MPS daemon (harness/parent/mps.py) where the machine has none to offer: one line saying why,
and nothing in the environment that points workers at a daemon."""
import os

from harness.parent import mps


def test_no_mps_control_is_one_line_and_leaves_the_environment_alone(monkeypatch):
    monkeypatch.setattr(mps, "_STATE", {})
    monkeypatch.delenv(mps.PIPE, raising=False)
    monkeypatch.setattr(mps.shutil, "which", lambda name: None)
    assert mps.start() == "no MPS (nvidia-cuda-mps-control not found)"
    assert mps.start() == "no MPS (nvidia-cuda-mps-control not found)"  # asked once per process
    assert mps.PIPE not in os.environ


def test_a_named_daemon_without_its_control_socket_is_not_used(monkeypatch, tmp_path):
    monkeypatch.setattr(mps, "_STATE", {})
    monkeypatch.setenv(mps.PIPE, str(tmp_path))
    monkeypatch.setattr(mps.shutil, "which", lambda name: "/usr/bin/nvidia-cuda-mps-control")
    assert mps.start() == f"no MPS daemon at {mps.PIPE}={tmp_path}"
    (tmp_path / "control").touch()
    monkeypatch.setattr(mps, "_STATE", {})
    assert mps.start() is None


def test_a_sandboxed_worker_reaches_the_daemon_only_until_its_view_is_closed(monkeypatch, tmp_path):
    """The worker finds the daemon's sockets through links of its own (mps.worker_view), bound where
    CUDA_MPS_PIPE_DIRECTORY points; once closed (after its CUDA context is made, before the
    submission is imported) nothing in its sandbox reaches the daemon's control socket. A stand-in
    daemon: a Unix socket listening at <pipe>/control."""
    import socket
    import subprocess
    import sys

    import pytest

    from conftest import ROOT
    from harness.parent.launch import bwrap_command, find_bwrap, sandbox_problem

    if sandbox_problem():
        pytest.skip(f"no OS sandbox here: {sandbox_problem()}")
    pipe = tmp_path / "pipe"
    pipe.mkdir()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(pipe / "control"))
    server.listen(4)
    monkeypatch.setattr(mps, "_STATE", {"root": str(tmp_path)})
    monkeypatch.setenv(mps.PIPE, str(pipe))
    view = mps.worker_view()
    assert view is not None and view != pipe and (view / "control").exists()
    probe = ("import os, socket, sys\n"
             "def reach():\n"
             "    s = socket.socket(socket.AF_UNIX)\n"
             "    try:\n"
             f"        s.connect({str(pipe / 'control')!r}); return 'reached'\n"
             "    except OSError as e: return type(e).__name__\n"
             "print(reach(), flush=True); sys.stdin.readline(); print(reach(), sorted(os.listdir(" + repr(str(pipe)) + ")), flush=True)\n")
    box = bwrap_command(find_bwrap(), ROOT / "submissions" / "torch_batched.py", [], mps_view=view)
    try:
        child = subprocess.Popen(box + [sys.executable, "-c", probe], pass_fds=box.fds, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        box.close()
    try:
        assert child.stdout.readline().strip() == "reached"
        mps.close_view(view)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "FileNotFoundError []"
    finally:
        child.kill()
        child.wait()
        server.close()
    assert (pipe / "control").exists()  # the daemon's own socket is untouched
    mps.close_view(view, remove=True)
    assert not view.exists()


def test_a_daemon_left_by_a_killed_run_is_told_to_quit_and_a_live_runs_is_not(tmp_path):
    """A run killed with its daemon running leaves the daemon (and its server, holding the GPU);
    the next run's start tells it to quit and removes its folder. A daemon whose run is alive, or a
    folder that names no run, is left alone. The control program is a stand-in that logs its input."""
    import subprocess
    import sys

    log = tmp_path / "quits.log"
    exe = tmp_path / "fake-mps-control"
    exe.write_text(f"#!{sys.executable}\nimport os, sys\n"
                   f"open({str(log)!r}, 'a').write(os.environ['CUDA_MPS_PIPE_DIRECTORY'] + ' ' + sys.stdin.read())\n")
    exe.chmod(0o755)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folders = {}
    for name, owner in (("dead", str(dead.pid)), ("live", str(os.getpid())), ("unnamed", None)):
        root = tmp_path / f"{mps.PREFIX}{name}"
        (root / "pipe").mkdir(parents=True)
        (root / "pipe" / "control").touch()
        if owner:
            (root / mps.OWNER).write_text(owner)
        folders[name] = root
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "pipe").mkdir(parents=True)
    (elsewhere / mps.OWNER).write_text(str(dead.pid))
    (tmp_path / f"{mps.PREFIX}link").symlink_to(elsewhere)  # a link is nobody's daemon folder: left alone
    assert mps.quit_orphans(str(exe), str(tmp_path)) == [folders["dead"]]
    assert log.read_text() == f"{folders['dead'] / 'pipe'} quit\n"
    assert not folders["dead"].exists() and folders["live"].exists() and folders["unnamed"].exists()
    assert elsewhere.exists()
    # a daemon that did not take the quit keeps its folder (the only way to reach it) for the next run
    failing = tmp_path / "failing-mps-control"
    failing.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(1)\n")
    failing.chmod(0o755)
    (folders["live"] / mps.OWNER).write_text(str(dead.pid))
    assert mps.quit_orphans(str(failing), str(tmp_path)) == [folders["live"]]
    assert folders["live"].exists()
