"""task.yml is validated on load; every problem is one error naming the key."""

import pytest
import yaml
from conftest import ROOT

import reference
from harness.task.spec import SpecError, load_task


def write_variant(tmp_path, edit):
    raw = yaml.safe_load((ROOT / "task.yml").read_text())
    edit(raw)
    path = tmp_path / "task.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_real_task_loads():
    spec = load_task(ROOT / "task.yml", reference.generate_input)
    assert spec.dims["num_heads"] == 16 and spec.dims["qk_head_dim"] == 576
    assert spec.dims["sm_scale"] == pytest.approx(576 ** -0.5)
    shapes = {(c.args["batchsize"], c.args["kvseqlen"]) for c in spec.cases("benchmark")}
    assert shapes == {(b, l) for b in (4, 32, 64, 256) for l in (1024, 8192)}
    assert all(c.args["qseqlen"] == 1 for c in spec.cases("benchmark"))
    assert any("kvseqlens" in c.args for c in spec.cases("test"))
    assert spec.ranking == "geom" and spec.cases("test", small=True)


@pytest.mark.parametrize("edit,message", [
    (lambda t: t.update(extra=1), "task.yml: extra: unknown key"),
    (lambda t: t.pop("ranking"), "task.yml: ranking: missing"),
    (lambda t: t["timeouts"].update(startup="soon"), "task.yml: timeouts.startup: expected a number, got str"),
    (lambda t: t["timing"].pop("max_runs"), "task.yml: timing.max_runs: missing"),
    (lambda t: t["timing"].update(min_runs=2.5), "task.yml: timing.min_runs: expected int, got float"),
    (lambda t: t["cpu"].update(tests="all"), "task.yml: cpu.tests: expected a list, got str"),
    (lambda t: t.update(ranking="fastest"), "ranking: must be one of geom, mean, last"),
    (lambda t: t["tests"][2].update(batchsze=4), "task.yml: tests[2].batchsze: unknown key"),
    (lambda t: t["benchmarks"][0].pop("kvseqlen"), "task.yml: benchmarks[0].kvseqlen: missing"),
    (lambda t: t["tests"][0].pop("seed"), "tests[0].seed: every case needs an integer seed"),
    (lambda t: t.update(benchmarks=[]), "benchmarks: must list at least one case"),
    (lambda t: t["check"].update(policy="lenient"), "check.policy: 'lenient' is not one of check.policies"),
    (lambda t: t["check"]["policies"]["strict"].update(rel_l2="2%"),
     "check.policies.strict.rel_l2: expected a number, got str"),
    # values, not only keys: a negative tolerance would pass zeros, a zero one divide by zero
    (lambda t: t["check"]["policies"]["strict"].update(rel_l2=-0.02),
     "check.policies.strict.rel_l2: must be a positive number, got -0.02"),
    (lambda t: t["check"]["policies"]["strict"].update(row_rel_l2=0),
     "check.policies.strict.row_rel_l2: must be a positive number, got 0"),
    (lambda t: t["check"]["policies"]["competition"].update(atol=float("nan")),
     "check.policies.competition.atol: must be a positive number, got nan"),
    (lambda t: t["check"]["policies"]["competition"].update(max_mismatch=1.5),
     "check.policies.competition.max_mismatch: a share of the elements, 0 or more and below 1, got 1.5"),
    (lambda t: t["timeouts"].update(test_case=0), "timeouts.test_case: must be a positive number of seconds, got 0"),
    (lambda t: t["timing"].update(warmup_calls=-1), "timing.warmup_calls: must be 0 or more, got -1"),
    (lambda t: t["timing"].update(max_seconds=-5), "timing.max_seconds: must be a positive number, got -5"),
    (lambda t: t["timing"].update(target_rel_ci=0), "timing.target_rel_ci: must be between 0 and 1, got 0"),
])
def test_bad_task_file_names_the_key(tmp_path, edit, message):
    with pytest.raises(SpecError) as err:
        load_task(write_variant(tmp_path, edit), reference.generate_input)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_competition_task_is_the_competitions_own_case_list():
    """tasks/competition/task.yml: the competition's final tests, benchmarks and seeds (its task
    file in gpu-mode/reference-kernels), its check by default, and the repository's reference.py."""
    spec = load_task(ROOT / "tasks" / "competition" / "task.yml", reference.generate_input)
    tests = [(c.args["batchsize"], c.args["kvseqlen"], c.args["seed"]) for c in spec.cases("test")]
    assert tests == [(4, 1024, 4220), (32, 1024, 5412), (64, 8192, 1360), (256, 8192, 9826)]
    benchmarks = [(c.args["batchsize"], c.args["kvseqlen"], c.args["seed"]) for c in spec.cases("benchmark")]
    assert benchmarks == [(4, 1024, 4217), (4, 8192, 4220), (32, 1024, 5412), (32, 8192, 5415),
                          (64, 1024, 1357), (64, 8192, 1360), (256, 1024, 9823), (256, 8192, 9826)]
    every = spec.tests + spec.benchmarks + spec.cpu.tests + spec.cpu.benchmarks
    assert all(c["qseqlen"] == 1 and "kvseqlens" not in c for c in every)
    assert spec.check.policy == "competition" and spec.ranking == "geom"
    assert (ROOT / "tasks" / "competition" / spec.reference).resolve() == ROOT / "reference.py"
    assert load_task(ROOT / "task.yml").companion == "tasks/competition/task.yml"


def test_case_defaults_reach_every_case_and_are_checked(tmp_path):
    """`case_defaults` (the competition task's input style) joins every case's arguments; a case's
    own value wins; a default generate_input does not take is an error naming it."""
    spec = load_task(ROOT / "tasks" / "competition" / "task.yml", reference.generate_input)
    assert spec.case_defaults == {"style": "competition"}
    for kind in ("test", "benchmark"):
        for small in (False, True):
            assert all(c.args["style"] == "competition" for c in spec.cases(kind, small))
    own = load_task(write_variant(tmp_path, lambda t: (t.update(case_defaults={"style": "competition"}),
                                                       t["tests"][0].update(style="default"))))
    assert own.cases("test")[0].args["style"] == "default" and own.cases("test")[1].args["style"] == "competition"
    with pytest.raises(SpecError, match=r"tests\[0\]\.colour: unknown key"):
        load_task(write_variant(tmp_path, lambda t: t.update(case_defaults={"colour": 1})), reference.generate_input)


def test_invalid_yaml(tmp_path):
    path = tmp_path / "task.yml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_task(path)
