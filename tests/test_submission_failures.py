"""Every way a submission can fail gives one clear line naming the cause, and never stops the
evaluation of the others."""

import dataclasses

import pytest
from conftest import ROOT, ZOO, log_of

from harness.config import RunContext

from harness.parent.engine import evaluate
from harness.config import RunConfig

pytestmark = pytest.mark.slow  # one worker per broken submission: end to end


def run(problem, cpu, name, mode="test", tmp_path=None, **timeouts):
    if timeouts:
        problem = dataclasses.replace(problem, spec=dataclasses.replace(
            problem.spec, timeouts=dataclasses.replace(problem.spec.timeouts, **timeouts)))
    path = ZOO / name if (ZOO / name).exists() else ROOT / "submissions" / name
    return evaluate(path, RunContext(problem, cpu, RunConfig(small=True, logs=str(tmp_path))), mode)


def first_failure(result):
    if result.error:
        return result.error
    return next(c.reason for c in result.cases if not c.ok)


CASES = [
    ("syntax_error.py", "syntax error at line 3"),
    ("needs_aiter.py", "aiter is an AMD ROCm package"),
    ("import_crash.py", "failed while importing: SystemExit: refusing to load"),
    ("no_kernel.py", "defines no custom_kernel"),
    ("returns_list.py", "custom_kernel returned list, expected a torch.Tensor"),
    ("wrong_shape.py", "output shape (2, 16, 256), expected (2, 16, 512)"),
    ("wrong_dtype.py", "output dtype torch.float32, expected torch.bfloat16"),
    ("raises.py", "exception: ValueError: kernel not implemented for this shape"),
    ("segfault.py", "crashed: worker process killed by SIGSEGV"),
    ("exits.py", "crashed: worker process exited with code 3"),
    ("exits_politely.py", "exception: SystemExit"),
    ("out_of_memory.py", "out of memory:"),
    ("zeros.py", "output differs from the reference"),
    ("drops_small_weights.py", "output differs from the reference"),
    ("rounds_p_to_fp8.py", "output differs from the reference"),
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
    assert "check: pass" in log_of(tmp_path, "prints_results")


def test_honest_baselines_pass_test_and_benchmark(problem, cpu, tmp_path):
    for name in ("torch_batched.py", "torch_loop.py"):
        result = run(problem, cpu, name, mode="leaderboard", tmp_path=tmp_path)
        assert result.ok, first_failure(result)
        bench = [c for c in result.cases if c.kind == "benchmark"]
        assert bench and all(c.device and c.device.runs >= 3 for c in bench)
        assert result.geomean_us() > 0


EXPLOITS = [  # (file, mode, expected reason): each must be rejected for the right reason
    ("caches_by_shape.py", "benchmark", "timed call 1: output differs from the reference"),
    ("caches_by_pointer.py", "benchmark", "timed call 1: output differs from the reference"),
    ("caches_by_content.py", "benchmark", "timed call 1: output differs from the reference"),
    # torch.empty holds whatever was there: a stale answer (wrong for fresh inputs) or garbage
    ("stale_empty.py", "benchmark", "output differs from the reference|NaN/inf values"),
    ("lagged_answer.py", "benchmark", "timed call 1: output differs from the reference"),
    ("counts_calls.py", "benchmark", "output differs from the reference"),
    ("patches_timer.py", "test", "timer function time.perf_counter was replaced by the submission"),
    ("patches_checker.py", "test", "output differs from the reference"),
    ("walks_gc.py", "test", "output differs from the reference"),
    ("writes_fds.py", "test", "protocol: malformed message from the worker"),
]


@pytest.mark.parametrize("name,mode,expected", EXPLOITS, ids=[e[0] for e in EXPLOITS])
def test_exploit_is_rejected(problem, cpu, tmp_path, capfd, name, mode, expected):
    result = run(problem, cpu, name, mode=mode, tmp_path=tmp_path)
    assert not result.ok
    reason = first_failure(result)
    assert any(e in reason for e in expected.split("|")), reason
    out, err = capfd.readouterr()
    assert "check: pass" not in out + err


def test_no_seed_reaches_the_worker(problem, cpu, tmp_path):
    ctx = RunContext(problem, cpu, RunConfig(small=True, logs=str(tmp_path), seed=987654321))
    result = evaluate(ZOO / "probes_env.py", ctx, "test")
    assert result.ok, result.error or [f"{c.name}: {c.reason}" for c in result.cases if not c.ok]
    log = log_of(tmp_path, "probes_env")
    assert "env:" in log
    secrets_ = {str(ctx.secret)} | {str(ctx.case_seed(c)) for c in problem.spec.cases("test", small=True)}
    assert not [s for s in secrets_ if s in log]


def test_gc_walk_finds_no_expected_output(problem, cpu, tmp_path):
    run(problem, cpu, "walks_gc.py", tmp_path=tmp_path)
    assert "found 0 candidate tensors" in log_of(tmp_path, "walks_gc")


def test_honest_submission_passes_20_fresh_seeds_in_a_row(problem, cpu, tmp_path):
    spec = dataclasses.replace(problem.spec, timing=dataclasses.replace(
        problem.spec.timing, min_runs=20, max_runs=20, max_seconds=600.0))
    ctx = RunContext(dataclasses.replace(problem, spec=spec), cpu, RunConfig(small=True, logs=str(tmp_path)))
    result = evaluate(ROOT / "submissions" / "torch_batched.py", ctx, "benchmark")
    assert result.ok, first_failure(result)
    assert all(c.device.runs == 20 for c in result.cases)


def test_case_seeds_mix_in_the_run_secret(problem, cpu, tmp_path):
    case = problem.spec.cases("test", small=True)[0]
    a = RunContext(problem, cpu, RunConfig(seed=1)).case_seed(case)
    b = RunContext(problem, cpu, RunConfig(seed=2)).case_seed(case)
    assert a != b and a != case.seed


def test_case_seeds_do_not_give_the_secret_away(problem, cpu, tmp_path):
    """A worker can learn case seeds (the CPU generator keeps 32 bits of one: a search over them
    finds it from the inputs). With a pairing function, consecutive public seeds a, a + 1 gave
    seeds differing by secret + a + 2, so two of them gave the secret; keyed hashing shows nothing
    of it, not even in the low 32 bits."""
    import dataclasses

    secret, mask, p = 2420304158747647560, (1 << 32) - 1, 2**63 - 1
    ctx = RunContext(problem, cpu, RunConfig(seed=secret))
    case = problem.spec.cases("test", small=True)[0]
    for a in (case.seed, 7, 123456):
        low, high = (ctx.case_seed(dataclasses.replace(case, args={**case.args, "seed": s})) for s in (a, a + 1))
        assert (high - low) % p & mask != (secret + a + 2) % p & mask
    assert RunContext(problem, cpu, RunConfig(seed=secret)).case_seed(case) == ctx.case_seed(case)  # --seed reproduces


def test_timed_call_seeds_follow_the_secret(problem, cpu, tmp_path):
    case = problem.spec.cases("benchmark", small=True)[0]
    draw = lambda secret: [f() for f in [RunContext(problem, cpu, RunConfig(seed=secret)).timed_seeds(case)] for _ in range(3)]  # noqa: E731
    first, again, other = draw(7), draw(7), draw(8)
    assert first == again and first != other and len(set(first)) == 3
