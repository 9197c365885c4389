"""A worker that rewrites its timing replies moves no ranked number on any path that times: the
leaderboard and benchmark modes, parallel evaluators (`--workers`), the Ray backend and kernelbot's
popcorn `benchmark` pipe. tests/zoo_os/forges_timing.py patches the worker's timer and its channel
to report 1 µs per call while each call really takes 30 ms; on the CPU the parent's own clock
times every call on each of these paths, so each must show at least 30 ms. (On a GPU the same
paths take the parent's fenced clock through one function, `CaseInputs.call`; a fake fenced worker
that forges its replies is tested there, tests/test_fence.py.)"""

import json
import shutil

import pytest
from conftest import ROOT, cli

FORGER = ROOT / "tests" / "zoo_os" / "forges_timing.py"
REAL_US = 30_000  # what each of its calls really takes (it sleeps 30 ms)


def _medians(path):
    rows = json.loads(path.read_text())["rows"]
    timed = [r["median_us"] for r in rows if r["kind"] == "benchmark"]
    assert timed and all(r["passed"] for r in rows), rows[0].get("error")
    return timed


@pytest.mark.slow
@pytest.mark.parametrize("flags", [
    ("--mode", "leaderboard"),
    ("--mode", "benchmark"),
    ("--mode", "benchmark", "--workers", "2", "--gpus", "0"),
    ("--mode", "benchmark", "--backend", "ray"),
], ids=["leaderboard", "benchmark", "workers", "ray"])
def test_forged_replies_move_no_ranked_number(tmp_path, flags):
    if "ray" in flags:
        pytest.importorskip("ray")
    submission = tmp_path / "forges_timing.py"
    shutil.copy(FORGER, submission)
    out = tmp_path / "r.json"
    code = cli(tmp_path, *flags, "--small", "--budget", "0.05", "--submission", str(submission), "--json", str(out))
    assert code == 0
    assert all(us >= REAL_US for us in _medians(out))


@pytest.mark.slow
def test_forged_replies_move_no_popcorn_benchmark_line(tmp_path):
    from test_popcorn import kernelbot

    code, result, _, _, _ = kernelbot(tmp_path, "benchmark", FORGER)
    assert code == 0 and result["check"] == "pass"
    count = int(result["benchmark-count"])
    for i in range(count):
        assert float(result[f"benchmark.{i}.best"]) >= REAL_US * 1e3  # ns
