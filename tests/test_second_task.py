"""A second task (tasks/rmsnorm: task.yml + reference.py, nothing in harness/ knows it) runs end to
end through eval.py: its check proves itself, an honest submission passes and is ranked by the
task's own ranking rule, a wrong one fails with the task's reason. In a separate process: loading
a task makes its reference.py the `reference` module."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # eval.py in subprocesses: end to end

TASK = ROOT / "tasks" / "rmsnorm"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "eval.py"), "--device", "cpu", "--task", str(TASK / "task.yml"),
                           *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_second_task_selftest_and_leaderboard(tmp_path):
    selftest = run("--mode", "selftest")
    assert selftest.returncode == 0, selftest.stderr[-2000:]
    board = run("--mode", "leaderboard", "--budget", "0.2", "--no-progress", "--db", str(tmp_path / "r.db"),
                "--logs", str(tmp_path / "logs"), "--json", str(tmp_path / "out.json"),
                "--submission", str(TASK / "submissions" / "torch_rmsnorm.py"),
                "--submission", str(TASK / "submissions" / "forgets_weight.py"))
    assert board.returncode == 1, board.stderr[-2000:]  # one of the two fails
    assert "rank by mean µs" in " ".join(board.stdout.split())
    rows = json.loads((tmp_path / "out.json").read_text())["rows"]
    verdicts = {r["submission"]: r["passed"] for r in rows}
    assert verdicts == {"torch_rmsnorm.py": True, "forgets_weight.py": False}
    reasons = " ".join(r["detail"] for r in rows if r["submission"] == "forgets_weight.py")
    assert "output differs from the reference: rel L2" in reasons
