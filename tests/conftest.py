import dataclasses
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ZOO = Path(__file__).resolve().parent / "zoo"
TRITON_KERNELS = ("triton_bf16.py", "triton_fp8.py", "triton_mxfp4.py")  # the bundled Triton submissions
sys.path.insert(0, str(ROOT))

from harness.device import detect  # noqa: E402
from harness.task.problem import load_problem  # noqa: E402
from harness.task.spec import Timeouts, Timing  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes over ~20 s on a 2-core CPU machine (deselect with -m 'not slow')")


def cli(tmp_path: Path, *args: str) -> int:
    """eval.py's main, with this test's own database and log folder, no progress bars, and on the
    CPU (these tests assert what a CPU run prints; on a GPU machine they would otherwise run on the
    GPU; GPU behaviour is checked by the device scripts in lab/)."""
    from harness.cli import main

    return main(["--no-progress", "--device", "cpu", "--db", str(tmp_path / "r.db"), "--logs", str(tmp_path / "logs"),
                 *args])


def processes_with(marker: str) -> list[int]:
    """The processes of this machine whose command line holds `marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:  # gone meanwhile
            pass
    return found


def load_submission(name: str, tag: str):
    """A bundled submission file as a fresh module (its module-level state is the test's own)."""
    from harness.worker.loop import load_module

    return load_module(ROOT / "submissions" / name, f"{tag}_{name[:-3]}")


def log_of(folder: Path, stem: str) -> str:
    """The text of the one worker log of a submission named `stem` in `folder`."""
    (found,) = Path(folder).glob(f"{stem}.*.log")
    return found.read_text()


@pytest.fixture(scope="session")
def problem():
    """The real task, with budgets cut so the CPU tests stay fast."""
    base = load_problem(ROOT / "task.yml")
    spec = dataclasses.replace(
        base.spec,
        timeouts=Timeouts(startup=120, test_case=20, benchmark_case=60),
        timing=Timing(warmup_calls=1, min_runs=3, max_runs=5, max_seconds=2.0, target_rel_ci=0.5),
    )
    return dataclasses.replace(base, spec=spec)


@pytest.fixture(scope="session")
def cpu():
    return detect("cpu")


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    """A folder where this test's temporary folders (workers' scratch) land, apart from those of
    other runs on the machine, so a test can see that none is left behind."""
    import tempfile

    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def gpu_case_inputs(spec, call, fenced=False):
    """What the engine's `_benchmark_case` reads of a case's inputs, with GPU flags and `call(timed,
    deadline[, method])` standing in for the worker: the engine's own timing code runs on the CPU.
    `fenced`: the box has a fence (the parent's clock), so the engine also asks for the worker's own
    event-timed calls (method "events")."""
    import types

    ctx = types.SimpleNamespace(problem=types.SimpleNamespace(spec=spec, bytes_moved=lambda data: {"bf16": 1000}),
                                graph=False, device=types.SimpleNamespace(is_gpu=True),
                                timed_seeds=lambda case: (lambda: 1), watch=None, energy=False,
                                diagnostics=False)
    box = types.SimpleNamespace(fence=types.SimpleNamespace(copy_s=lambda nbytes: nbytes * 1e-12,
                                                            cost_s=lambda nbytes: 20e-6 + nbytes * 1e-12,
                                                            cost_ci_s=lambda nbytes: 1e-6)
                                if fenced else None)
    import torch

    return types.SimpleNamespace(ctx=ctx, case=spec.cases("benchmark")[0], box=box, pristine=None,
                                 call=call, refill=lambda seed: None, layout=((4, 16, 512), torch.bfloat16),
                                 data=(torch.zeros(4, 16, 576, dtype=torch.bfloat16),))
