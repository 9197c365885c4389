"""The built wheel carries everything an installed `mla-eval` runs: the worker's side of the harness
(it runs from the installed copy) and the tasks, in the checkout's layout. (.ci/run installs it in a
fresh environment and evaluates a file through it.)"""
import subprocess
import sys
import zipfile

import pytest
from conftest import ROOT


@pytest.mark.slow
def test_the_wheel_holds_the_worker_and_every_task(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True, timeout=300, cwd=tmp_path)
    (wheel,) = tmp_path.glob("mla_eval-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in ("harness/worker/__main__.py", "harness/worker/loop.py", "harness/worker/timer.py",
                   "harness/parent/fence.py", "harness/report/html_report.py", "harness/report/__init__.py", "harness/report/board.py"):
        assert module in names, module
    data = "mla_eval-0.1.0.data/data/share/mla-eval/"
    for task in ("task.yml", "reference.py", "tasks/competition/task.yml", "tasks/rmsnorm/task.yml",
                 "tasks/rmsnorm/reference.py"):
        assert data + task in names, task
