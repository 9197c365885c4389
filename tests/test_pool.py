"""Parallel evaluation (harness/parent/pool.py, harness/parent/ray_backend.py) on CPU workers: the same verdicts
as a sequential run, a killed evaluator reported and not lost, pinning per simulated GPU."""

import shutil
import sys

import pytest

from conftest import ROOT, ZOO, cli, log_of

from harness.config import RunContext
from harness.parent.engine import evaluate
from harness.config import RunConfig
from harness.parent.pool import evaluate_parallel, slot_envs

pytestmark = pytest.mark.slow  # evaluator processes and a local Ray: end to end

POOL_ZOO = ROOT / "tests" / "zoo_pool"
MIXED = [ROOT / "submissions" / "torch_batched.py", ZOO / "zeros.py", ZOO / "segfault.py", ZOO / "wrong_shape.py"]


def config_for(problem, tmp_path, mode="test", **kw):
    return RunConfig(task=str(problem.spec.path), mode=mode, device="cpu", small=True,
                     logs=str(tmp_path / "logs"), seed=1234, **kw)


def verdicts(result):
    return (result.name, result.ok, result.error, [(c.kind, c.name, c.ok, c.reason) for c in result.cases])


@pytest.fixture(scope="module")
def sequential(problem, cpu, tmp_path_factory):
    """{path: verdicts} of MIXED evaluated one after the other (computed once for the module)."""
    ctx = RunContext(problem, cpu, RunConfig(small=True, logs=str(tmp_path_factory.mktemp("seq")), seed=1234))
    return {p: verdicts(evaluate(p, ctx, "test")) for p in MIXED}


def test_pool_verdicts_match_the_sequential_run(problem, tmp_path, sequential):
    finished = []
    parallel = evaluate_parallel(MIXED, config_for(problem, tmp_path), slot_envs(0, 2, "cpu"),
                                 lambda i, r: finished.append(i))
    assert sorted(finished) == list(range(len(MIXED)))
    assert [verdicts(r) for r in parallel] == [sequential[p] for p in MIXED]
    assert [r.ok for r in parallel] == [True, False, False, False]


def test_killed_evaluator_is_reported_and_the_rest_go_on(problem, tmp_path, own_tmp, monkeypatch):
    """Unsandboxed, a worker can kill the evaluator that started it (sandboxed it cannot see it:
    tests/test_sandbox.py): the pool reports it and carries on, and removes the killed evaluator's
    temporary folders (its worker's scratch) that it could not remove itself."""
    monkeypatch.setenv("TMPDIR", str(own_tmp))  # (what the evaluators would use without the pool's folder)
    paths = [POOL_ZOO / "kills_evaluator.py", ROOT / "submissions" / "torch_batched.py", ZOO / "zeros.py"]
    results = evaluate_parallel(paths, config_for(problem, tmp_path, sandbox="off"), slot_envs(0, 1, "cpu"))
    assert not results[0].ok
    assert results[0].error == "evaluator process killed by SIGKILL while evaluating this submission"
    assert results[1].ok  # a fresh evaluator took the slot
    assert not results[2].ok and "zeros" not in results[2].error
    assert list(own_tmp.iterdir()) == []


def test_each_evaluator_is_pinned_to_its_own_gpu(problem, tmp_path):
    """Three simulated GPUs: each evaluator gets its own CUDA_VISIBLE_DEVICES, and the submission's
    worker (a child of the evaluator) inherits it."""
    copies = []
    for i in range(3):
        copy = tmp_path / f"pin{i}.py"
        shutil.copy(POOL_ZOO / "reports_pin.py", copy)
        copies.append(copy)
    envs = slot_envs(3, 3, "nvidia")
    assert envs == [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}, {"CUDA_VISIBLE_DEVICES": "2"}]
    assert slot_envs(2, 4, "amd") == [{"HIP_VISIBLE_DEVICES": str(i % 2)} for i in range(4)]
    results = evaluate_parallel(copies, config_for(problem, tmp_path), envs)
    assert all(r.ok for r in results)
    pins = sorted(log_of(tmp_path / "logs", f"pin{i}").split("pinned to: ")[1].split()[0]
                  for i in range(3))
    assert pins == ["'0'", "'1'", "'2'"]


def test_cli_parallel_mode_exit_code_and_store(tmp_path, capsys):
    from harness.report.store import Store

    db = tmp_path / "r.db"
    code = cli(tmp_path, "--mode", "test", "--gpus", "0", "--workers", "2",
               "--submission", str(ROOT / "submissions" / "torch_batched.py"), "--submission", str(ZOO / "zeros.py"))
    assert code == 1
    err = capsys.readouterr().err
    assert "2 evaluator(s) in parallel on the CPU" in err
    rows = Store(str(db)).runs()
    assert rows[0]["status"] == "complete" and rows[0]["submissions"] == 2 and rows[0]["passed"] == 1


def test_a_file_out_of_time_beside_others_is_evaluated_again_alone(tmp_path, capsys):
    """A neighbour can starve the other evaluators of CPU (red-team pass 11: 300 spinning children,
    each in a session of its own, timed an honest file out): a file that times out beside other
    evaluators is evaluated again alone, once, and that verdict is the one stored."""
    from harness.report.store import Store

    db = tmp_path / "r.db"
    code = cli(tmp_path, "--mode", "test", "--gpus", "0", "--workers", "2", "--timeout", "3",
               "--submission", str(ROOT / "submissions" / "torch_batched.py"), "--submission", str(ZOO / "hangs.py"))
    assert code == 1
    err = capsys.readouterr().err
    assert err.count("hangs.py: timed out or crashed beside other evaluators: evaluated again alone") == 1
    assert "torch_batched.py: timed out or crashed" not in err
    rows = Store(str(db)).runs()
    assert rows[0]["status"] == "complete" and rows[0]["submissions"] == 2 and rows[0]["passed"] == 1


def test_timed_runs_on_the_cpu_say_their_numbers_do_not_rank(tmp_path, capsys):
    """CPU timings differ many times over between identical runs; evaluators in parallel on the
    CPU also overlap their timed calls: both said before any work (the file fails at import)."""
    code = cli(tmp_path, "--mode", "benchmark", "--gpus", "0", "--workers", "2",
               "--submission", str(ZOO / "import_crash.py"), "--submission", str(ZOO / "syntax_error.py"))
    assert code == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "CPU timings (this process's clock around each call;" in err and "not to rank" in err
    assert "2 evaluators share this machine's CPUs: timed runs overlap" in err


@pytest.mark.parametrize("args, message", [
    (["--gpus", "2"], "--gpus 2: this machine has 0 usable GPU(s)"),
    (["--gpus", "many"], "--gpus many: expected all or a number"),
    (["--workers", "0"], "--workers must be at least 1"),
    (["--address", "ray://x:10001"], "--address goes with --backend ray"),
])
def test_parallel_flags_are_checked(tmp_path, capsys, args, message):
    code = cli(tmp_path, "--mode", "test", *args)
    assert code == 2
    assert message in capsys.readouterr().err


def test_ray_backend_matches_sequential(problem, tmp_path, sequential):
    pytest.importorskip("ray")
    from harness.parent.ray_backend import evaluate_ray

    paths = MIXED[:3]
    settings = config_for(problem, tmp_path, budget=problem.spec.timing.max_seconds)
    results = evaluate_ray(paths, settings, address=None, num_cpus=2)
    assert [verdicts(r) for r in results] == [sequential[p] for p in paths]
    assert [r.path for r in results] == [str(p) for p in paths]
    assert list((tmp_path / "logs").glob("segfault.*.log"))


def test_ray_missing_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    code = cli(tmp_path, "--mode", "test", "--backend", "ray", "--submission", str(ZOO / "zeros.py"))
    assert code == 2
    assert "--backend ray needs Ray: pip install \".[ray]\"" in capsys.readouterr().err


def test_an_interrupt_while_stopping_still_ends_every_evaluator():
    """A second Ctrl-C or SIGTERM while the pool gives an evaluator its grace period: every
    evaluator is still killed and its folder removed (before, the rest kept running, and the CLI
    waited for them at exit)."""
    from harness.parent.pool import stop_slots

    class Slot:
        def __init__(self, interrupts: bool):
            self.interrupts, self.killed = interrupts, False

        def stop(self):
            if self.interrupts:
                raise KeyboardInterrupt
            self.kill()

        def kill(self):
            self.killed = True

    slots = [Slot(True), Slot(False), Slot(False)]
    with pytest.raises(KeyboardInterrupt):
        stop_slots(slots)
    assert all(s.killed for s in slots)


def test_a_harness_fault_costs_one_file_in_a_sequential_run(tmp_path, capsys, monkeypatch):
    import harness.parent.engine

    real = harness.parent.engine.evaluate

    def faulty(path, *args, **kwargs):
        if str(path).endswith("zeros.py"):
            raise TypeError("a fault of the harness's")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(harness.parent.engine, "evaluate", faulty)
    code = cli(tmp_path, "--mode", "test", "--submission", str(ZOO / "zeros.py"),
               "--submission", str(ROOT / "submissions" / "torch_batched.py"))
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert code == 1 and "harness error: TypeError: a fault of the harness's" in out, out[-2000:]
    assert "Traceback" not in out and "FAIL torch_batched.py" not in out


def test_ray_ships_the_whole_task_its_reference_and_companion():
    """A Ray worker gets the task's files in their own layout: the competition task names
    ../../reference.py, and the default task its companion (tasks/competition/task.yml)."""
    from harness.parent.ray_backend import files_task, task_bundle

    bundle = task_bundle(ROOT / "tasks" / "competition" / "task.yml")
    assert set(bundle) == {"task/reference.py", "task/tasks/competition/task.yml", "task/.task"}
    assert files_task(bundle) == "tasks/competition/task.yml"
    bundle = task_bundle(ROOT / "task.yml")
    assert {"task/task.yml", "task/reference.py", "task/tasks/competition/task.yml"} <= set(bundle)


@pytest.mark.slow
@pytest.mark.parametrize("backend", [["--backend", "ray", "--workers", "2"], ["--gpus", "0", "--workers", "2"]])
def test_every_backend_runs_the_competition_task(tmp_path, capsys, backend):
    if backend[1] == "ray":
        pytest.importorskip("ray")
    code = cli(tmp_path, "--task", "competition", "--mode", "test", *backend,
               "--submission", str(ROOT / "submissions" / "torch_batched.py"))
    assert code == 0, capsys.readouterr().err[-600:]

