"""Every way a submission can fail gives one clear line naming the cause, and never stops the
evaluation of the others."""

import dataclasses

import pytest
from conftest import ROOT, ZOO

from harness.engine import RunContext, evaluate
from harness.spec import Timeouts


def run(problem, cpu, name, mode="test", tmp_path=None, **timeouts):
    if timeouts:
        problem = dataclasses.replace(problem, spec=dataclasses.replace(
            problem.spec, timeouts=dataclasses.replace(problem.spec.timeouts, **timeouts)))
    path = ZOO / name if (ZOO / name).exists() else ROOT / "submissions" / name
    return evaluate(path, RunContext(problem, cpu, small=True, log_dir=tmp_path), mode)


def first_failure(result):
    if result.error:
        return result.error
    return next(c.reason for c in result.cases if not c.ok)


CASES = [
    ("syntax_error.py", "syntax error at line 1"),
    ("needs_aiter.py", "aiter is an AMD ROCm package"),
    ("import_crash.py", "failed while importing: SystemExit: refusing to load"),
    ("no_kernel.py", "defines no custom_kernel"),
    ("returns_list.py", "custom_kernel returned list, expected a torch.Tensor"),
    ("wrong_shape.py", "output shape (2, 16, 256), expected (2, 16, 512)"),
    ("wrong_dtype.py", "output dtype torch.float32, expected torch.bfloat16"),
    ("raises.py", "exception: ValueError: kernel not implemented for this shape"),
    ("segfault.py", "crashed: worker process killed by SIGSEGV"),
    ("exits.py", "crashed: worker process exited with code 3"),
    ("out_of_memory.py", "out of memory:"),
    ("zeros.py", "output differs from the reference"),
    ("subclass_output.py", "output tensor is a subclass of torch.Tensor (Honest)"),
    ("aliases_input.py", "output tensor shares memory with an input tensor"),
    ("mutates_input.py", "custom_kernel modified its input data[1]['bf16']"),
]


@pytest.mark.parametrize("name,expected", CASES, ids=[c[0] for c in CASES])
def test_failure_is_one_clear_line(problem, cpu, tmp_path, name, expected):
    result = run(problem, cpu, name, tmp_path=tmp_path)
    assert not result.ok
    reason = first_failure(result)
    assert expected in reason
    assert "\n" not in reason and len(reason) < 400


def test_hang_is_killed_at_the_case_timeout(problem, cpu, tmp_path):
    result = run(problem, cpu, "hangs.py", tmp_path=tmp_path, test_case=3)
    reason = first_failure(result)
    assert reason.startswith("timeout: timed out after 3 s")
    # the worker is gone, so later cases are reported, not attempted
    assert all(c.reason.startswith("not run") for c in result.cases[1:])


def test_printing_fake_results_does_not_reach_our_output(problem, cpu, tmp_path, capfd):
    result = run(problem, cpu, "prints_results.py", tmp_path=tmp_path)
    assert result.ok  # printing is allowed; it just goes to the worker log
    out, err = capfd.readouterr()
    assert "check: pass" not in out + err
    assert "check: pass" in (tmp_path / "prints_results.log").read_text()


def test_honest_baselines_pass_test_and_benchmark(problem, cpu, tmp_path):
    for name in ("torch_batched.py", "torch_loop.py"):
        result = run(problem, cpu, name, mode="leaderboard", tmp_path=tmp_path)
        assert result.ok, first_failure(result)
        bench = [c for c in result.cases if c.kind == "benchmark"]
        assert bench and all(c.device and c.device.runs >= 3 for c in bench)
        assert result.geomean_us() > 0
