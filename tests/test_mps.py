"""The run's MPS daemon (harness/mps.py) where the machine has none to offer: one line saying why,
and nothing in the environment that points workers at a daemon."""
import os

from harness import mps


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
