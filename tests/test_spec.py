"""task.yml is validated on load; every problem is one error naming the key."""

import pytest
import yaml
from conftest import ROOT

import reference
from harness.spec import SpecError, load_task


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
])
def test_bad_task_file_names_the_key(tmp_path, edit, message):
    with pytest.raises(SpecError) as err:
        load_task(write_variant(tmp_path, edit), reference.generate_input)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_invalid_yaml(tmp_path):
    path = tmp_path / "task.yml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_task(path)
