"""Replay bundles (issue 41): --bundle writes one file with the files, hashes, seed, flags, versions
and results; --replay runs it again from the bundle's own copies, refuses in one line when a file at a
recorded path differs, and says per case whether the median is the same, faster or slower."""

import json
import shutil

import pytest
from conftest import ROOT, cli

from harness.cli import bundle
from harness.cli import build_parser
from harness.config import RunConfig
from harness.cli.flags import configuration, local_tasks
from harness.results import CaseResult, SubmissionResult
from harness.timing import summarize

SOURCE = "def custom_kernel(data):\n    return data[0]\n"


def made(tmp_path, source: str = SOURCE, *flags: str):
    """A bundle of a made-up run of one file (tmp_path/subs/mine.py) on a copy of the task."""
    (tmp_path / "subs").mkdir(exist_ok=True)
    path = tmp_path / "subs" / "mine.py"
    path.write_text(source)
    task = tmp_path / "task"
    task.mkdir(exist_ok=True)
    shutil.copy(ROOT / "task.yml", task / "task.yml")
    shutil.copy(ROOT / "reference.py", task / "reference.py")
    (task / "task.yml").write_text((task / "task.yml").read_text().replace("companion:", "# companion:"))
    args = build_parser().parse_args(["--budget", "0.5", "--mode", "benchmark", "--device", "cpu", "--seed", "7",
                                      "--task", str(task / "task.yml"), *flags])
    results = {"run": {"seed": 7}, "rows": [
        {"submission": "mine.py", "kind": "benchmark", "case": "4×1k", "case_ok": True, "median_us": 100.0,
         "ci95_rel": 0.01, "sha256": bundle.sha256(source.encode())}]}
    data = bundle.build(configuration(args, ["--mode", "benchmark"]),
                        [(str(path), "mine.py", bundle.sha256(source.encode()))], results, {"device": "test"})
    return bundle.write(tmp_path / "b.json", data), path, task


def test_a_bundle_holds_the_files_their_hashes_the_seed_and_the_flags(tmp_path):
    out, path, task = made(tmp_path)
    data = bundle.read(out)
    assert data["seed"] == 7 and data["flags"]["budget"] == 0.5 and data["flags"]["mode"] == "benchmark"
    (sub,) = data["submissions"]
    assert sub["text"] == SOURCE and sub["sha256"] == bundle.sha256(SOURCE.encode()) and sub["path"] == str(path)
    assert {f["path"] for f in data["task"]["files"]} == {"task.yml", "reference.py"}
    assert data["harness"]["git_commit"] is not None and data["command"] == ["--mode", "benchmark"]
    assert data["results"]["rows"][0]["median_us"] == 100.0


def test_a_file_changed_after_its_evaluation_is_not_bundled(tmp_path):
    path = tmp_path / "x.py"
    path.write_text(SOURCE)
    config = RunConfig(task=str(ROOT / "task.yml"), seed=1)
    with pytest.raises(bundle.BundleError, match="changed after it was evaluated"):
        bundle.build(config, [(str(path), "x.py", "0" * 64)], {"rows": []}, {})


def test_an_edited_or_foreign_bundle_is_refused(tmp_path):
    out, _, _ = made(tmp_path)
    data = json.loads(out.read_text())
    data["submissions"][0]["text"] += "# sneaky\n"
    (tmp_path / "edited.json").write_text(json.dumps(data))
    with pytest.raises(bundle.BundleError, match="does not match its own sha256"):
        bundle.read(tmp_path / "edited.json")
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(bundle.BundleError, match="not a replay bundle"):
        bundle.read(tmp_path / "other.json")


def test_replay_uses_recorded_files_that_match_and_copies_of_missing_submissions(tmp_path):
    out, path, task = made(tmp_path)
    work = tmp_path / "work"
    paths, task_path, notes = bundle.materialize(bundle.read(out), work)
    assert paths == [path] and task_path == task / "task.yml"
    path.unlink()
    (copy,), task_path, notes = bundle.materialize(bundle.read(out), work)
    assert copy.read_text() == SOURCE and copy.parent.name == "subs" and copy.name == "mine.py"  # names as before
    assert copy.is_relative_to(work) and task_path == task / "task.yml" and "1 from the bundle's copies" in notes[-1]


def test_a_replay_never_runs_the_bundles_copy_of_a_task(tmp_path):
    """A task is code the parent runs unsandboxed: a bundle's task that is not here is refused, never
    written out and run; one whose files this harness has (another checkout's path) is found by them."""
    out, _, task = made(tmp_path)
    shutil.rmtree(task)
    with pytest.raises(bundle.BundleError, match=r"replay refused: the bundle's task .*task.yml is not on this "
                                                 r"machine made of the same files, nor is any of this harness's"):
        bundle.materialize(bundle.read(out), tmp_path / "work")
    assert not (tmp_path / "work").exists()
    args = build_parser().parse_args(["--device", "cpu", "--seed", "7", "--task", str(ROOT / "task.yml")])
    sub = tmp_path / "subs" / "mine.py"
    data = bundle.build(configuration(args, []), [(str(sub), "mine.py", bundle.sha256(SOURCE.encode()))],
                        {"rows": []}, {})
    data["task"]["root"] = "/elsewhere/checkout"  # (not hashed: where the bundled run's checkout was)
    moved = bundle.read(bundle.write(tmp_path / "moved.json", data))
    _, task_path, notes = bundle.materialize(moved, tmp_path / "w", local_tasks())
    assert task_path == (ROOT / "task.yml").resolve() and "the same files as the bundle's" in notes[0]


def test_a_bundle_cannot_choose_how_a_replay_runs(tmp_path):
    """--sandbox, --share, --gpus, --workers, --backend, --address and --no-audit are the replaying command line's;
    a note names each the bundled run had otherwise."""
    out, path, _ = made(tmp_path)
    data = json.loads(out.read_text())
    data["flags"].update(sandbox="off", share=["/"], gpus="8", workers=8, backend="ray", address="10.0.0.9:6379",
                         no_audit=True)
    out.write_text(json.dumps(data))
    args = build_parser().parse_args(["--replay", str(out)])
    config = configuration(args, ["--replay", str(out)])
    assert (config.sandbox, config.share, config.gpus, config.workers, config.backend, config.address,
            config.no_audit) == ("auto", None, None, None, "local", None, False)
    notes = " ".join(config.replay_notes)
    assert "the bundled run had --sandbox off; this replay: auto" in notes and "--address 10.0.0.9:6379" in notes
    assert config.budget == 0.5 and config.mode == "benchmark" and config.submission == (str(path),)


def _resealed(data):
    """`data` with every file's sha256 made to match its text again (as anyone can)."""
    for entry in (*data["task"]["files"], *data["submissions"]):
        entry["sha256"] = bundle.sha256(entry["text"].encode())
    return data


def _rows(d, **values):
    for row in d["results"]["rows"]:
        row.update(values)


@pytest.mark.parametrize("edit, why", [
    (lambda d: _rows(d, submission="\x1b[2K\x1b[1Greplay: all the same"), "holds a control or formatting character"),
    (lambda d: d["environment"].update(device="abc\u202e"), "holds a control or formatting character"),
    (lambda d: d["flags"].update(sandbox="off\x07"), "holds a control or formatting character"),
    (lambda d: d["submissions"][0].update(path="/tmp/a\x00b.py"), "holds a control or formatting character"),
    (lambda d: _rows(d, median_us=-1.0), "a result row is not one this harness writes"),
    (lambda d: _rows(d, median_us="100"), "a result row is not one this harness writes"),
    (lambda d: d["results"].update(rows=[5]), "a result row is not one this harness writes"),
    (lambda d: d.update(submissions=[]), "it must hold 1 to 256 submissions"),
    (lambda d: d.update(harness=[]), "its flags, harness or task is not a table"),
    (lambda d: d["task"].update(root=5), "a task file's path is not one below"),
    (lambda d: d["task"]["files"][0].update(text=["x"]), "a file entry is not a path, a sha256 and a text"),
    (lambda d: [r.pop("kind") for r in d["results"]["rows"]], "a result row is not one this harness writes"),
    (lambda d: _rows(d, case="4×1k" + " " * 300), "a result row is not one this harness writes"),
    (lambda d: d["task"].pop("path"), "KeyError"),
    (lambda d: d["flags"].update(shape=["batchsize=1,qseqlen=1,kvseqlen=8"] * 65), "more than 64 --shape cases"),
    (lambda d: d["flags"].update(shape=["batchsize=" + "9" * 5000]), "or one longer than 4096 characters"),
    (lambda d: _rows(d, median_us=5e-324), "a result row is not one this harness writes"),
    (lambda d: d["harness"].update(git_commit="fcd5b7c, this is fcd5b7c"), "its harness commit is not a git commit"),
    (lambda d: d["submissions"][0].update(name="x" * 201), "a file entry is not a path, a sha256 and a text"),
])
def test_a_bundle_that_is_not_one_this_harness_writes_is_one_line(tmp_path, edit, why):
    """Red-team: everything a bundle holds reaches the terminal, the run or the comparison: its strings
    must be printable, its rows and numbers of the types written, before anything runs."""
    out, _, _ = made(tmp_path)
    data = json.loads(out.read_text())
    edit(data)
    out.write_text(json.dumps(_resealed(data) if "text" not in why else data))
    with pytest.raises(bundle.BundleError, match=why):
        bundle.read(out)


def test_unreadable_bundles_and_recorded_paths_that_are_not_files_are_one_line(tmp_path):
    import os

    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(bundle.BundleError, match="not JSON, or nested too deep"):
        bundle.read(tmp_path / "deep.json")
    with pytest.raises(bundle.BundleError, match="is not a regular file"):
        bundle.read("/dev/zero")
    os.mkfifo(tmp_path / "pipe")
    out, _, _ = made(tmp_path)
    (tmp_path / "inf.json").write_text(out.read_text().replace('"median_us": 100.0', '"median_us": 1e400'))
    with pytest.raises(bundle.BundleError, match="a result row is not one this harness writes"):
        bundle.read(tmp_path / "inf.json")
    for path in ("/dev/zero", str(tmp_path / "pipe"), str(tmp_path)):
        data = json.loads(out.read_text())
        data["submissions"][0]["path"] = path
        with pytest.raises(bundle.BundleError, match="replay refused: the submission .* is not a regular file"):
            bundle.materialize(bundle.read(bundle.write(tmp_path / "odd.json", data)), tmp_path / "work")


def test_a_recorded_path_of_another_size_is_never_read(tmp_path):
    """Red-team: a /proc file is "regular", reports size 0 and may read forever (or fail): a recorded
    file is read only at the size of the bundle's copy, and a bundle at such a path is read bounded."""
    out, _, _ = made(tmp_path)
    data = json.loads(out.read_text())
    data["submissions"][0]["path"] = "/proc/self/status"
    with pytest.raises(bundle.BundleError, match=r"/proc/self/status differs from the bundle's copy \(sha256"):
        bundle.materialize(bundle.read(bundle.write(out, data)), tmp_path / "work")
    with pytest.raises(bundle.BundleError, match="not a replay bundle"):
        bundle.read("/proc/self/status")


def test_a_task_file_the_bundle_leaves_out_is_not_run(tmp_path):
    """Red-team: a bundle listing only task.yml, recorded where a reference.py it does not hold sits."""
    out, _, task = made(tmp_path)
    data = json.loads(out.read_text())
    data["task"]["files"] = [e for e in data["task"]["files"] if e["path"] == "task.yml"]
    with pytest.raises(bundle.BundleError, match="is not on this machine made of the same files"):
        bundle.materialize(bundle.read(bundle.write(out, data)), tmp_path / "work")


@pytest.mark.parametrize("flags, why", [
    ({"small": "-h"}, "argument --small: ignored explicit argument '-h'"),
    ({"check": "--", "budget": "--sandbox"}, "argument --budget: invalid float value: '--sandbox'"),
    ({"budget": True}, "--budget True"),
    ({"mode": "compile"}, "--mode compile \\(a replay runs test, benchmark, leaderboard\\)"),
])
def test_a_bundles_flag_values_cannot_become_flags(tmp_path, flags, why):
    out, _, _ = made(tmp_path)
    data = json.loads(out.read_text())
    data["flags"].update(flags)
    with pytest.raises(bundle.BundleError, match="the bundle's flags are not valid: " + why):
        bundle.replay_args(bundle.read(bundle.write(out, data)), build_parser().parse_args(["--replay", str(out)]),
                           tmp_path / "work", build_parser, local_tasks())


def test_a_replay_trusts_neither_the_bundles_intervals_nor_its_labels():
    """Red-team: a bundled median 1.45x too good with a ±50% interval; two cases of one label (shapes
    that differ only by seed), one failing on replay; a row of a file that is not the bundle's."""
    old = [{"submission": "a.py", "kind": "benchmark", "case": "c0", "case_ok": True, "median_us": 100.0,
            "ci95_rel": 0.5}]
    (row,) = bundle.comparison(old, [{**old[0], "median_us": 145.0, "ci95_rel": 0.01}])
    assert row["mark"] == "slower"
    from harness.report import compare_marks

    assert compare_marks(5e-324, 0.01, 1e6, 0.01) == "slower" and compare_marks(0.1, 0, 2.0, 0) == "slower"
    rows = bundle.comparison([{**old[0], "ci95_rel": 0.01}] * 2,
                             [{**old[0], "ci95_rel": 0.01}, {**old[0], "case_ok": False, "ci95_rel": 0.01}])
    assert [(r["was"], r["now"]) for r in rows] == [("pass", "pass"), ("pass", "FAIL")]
    (row,) = bundle.comparison(old, [{**old[0], "sha256": "f" * 64}], frozenset({"0" * 64}))
    assert row["now"] == "pass of another file (sha256 ffffffffffff)" and not bundle.summary([row])[1]


def test_a_nan_interval_never_reads_same_and_an_unbundled_case_is_a_change(tmp_path):
    old = [{"submission": "a.py", "kind": "benchmark", "case": "c0", "case_ok": True, "median_us": 1.0}]
    (tmp_path / "b.json").write_text('{"ci95_rel": NaN}')
    assert json.loads((tmp_path / "b.json").read_text(), parse_constant=lambda _: None) == {"ci95_rel": None}
    new = [{**old[0], "median_us": 1956.0, "ci95_rel": 0.01}, {**old[0], "case": "c1"}]
    rows = bundle.comparison([{**old[0], "ci95_rel": None}], new)
    assert [r.get("mark") for r in rows] == ["slower", None] and rows[1]["was"] == "absent"
    assert bundle.summary(rows)[1] is False
    assert [r["now"] for r in bundle.comparison(old, [], frozenset({"0" * 64}))] == ["missing"]


@pytest.mark.parametrize("edit, why", [
    (lambda d: d["flags"].update(budget="soon"), "flags are not valid: argument --budget: invalid float value"),
    (lambda d: d["flags"].update(device="tpu"), "flags are not valid: argument --device: invalid choice"),
    (lambda d: d.update(seed="7"), "malformed bundle \\(seed '7' is not a whole number\\)"),
    (lambda d: d["task"]["files"][0].update(path="../../task.yml"), "malformed bundle \\(a task file's path"),
    (lambda d: d["task"]["files"][0].update(path="/etc/task.yml"), "malformed bundle \\(a task file's path"),
])
def test_a_bundles_values_are_checked_as_the_command_line_checks_them(tmp_path, edit, why):
    out, _, _ = made(tmp_path)
    data = json.loads(out.read_text())
    edit(data)
    out.write_text(json.dumps(data))
    with pytest.raises(bundle.BundleError, match=why):
        bundle.replay_args(bundle.read(out), build_parser().parse_args(["--replay", str(out)]), tmp_path / "work",
                           build_parser, local_tasks())


def test_a_bundles_copies_stay_in_the_replays_folder(tmp_path):
    out, _, _ = made(tmp_path)
    data = json.loads(out.read_text())
    for path, folder in (("/nowhere/../..", "folder"), ("/nowhere/" + "x" * 300, "nowhere")):
        data["submissions"][0]["path"] = path
        (copy,), _, _ = bundle.materialize(bundle.read(bundle.write(out, data)), tmp_path / "work")
        assert copy == tmp_path / "work" / "submissions" / "0" / folder / "submission.py"


def test_replay_refuses_a_changed_submission_or_task_in_one_line(tmp_path):
    out, path, task = made(tmp_path)
    path.write_text(SOURCE + "# edited\n")
    with pytest.raises(bundle.BundleError, match=r"replay refused: the submission .*mine.py differs from the "
                                                 r"bundle's copy \(sha256 \w{12} in the bundle\)"):
        bundle.materialize(bundle.read(out), tmp_path / "work")
    path.write_text(SOURCE)
    (task / "reference.py").write_text("# another task\n")
    with pytest.raises(bundle.BundleError, match="replay refused: the task file .*reference.py differs"):
        bundle.materialize(bundle.read(out), tmp_path / "work")


def test_replay_takes_its_flags_from_the_bundle(tmp_path):
    out, path, task = made(tmp_path)
    args = build_parser().parse_args(["--replay", str(out), "--json", "x.json"])  # outputs may be given
    values, notes = bundle.replay_args(bundle.read(out), args, tmp_path / "work", build_parser, local_tasks())
    assert (values["seed"], values["budget"], values["mode"], values["submission"], values["task"]) == (
        7, 0.5, "benchmark", [str(path)], str(task / "task.yml"))
    assert any("at their recorded paths" in note for note in notes)
    config = configuration(args, ["--replay", str(out), "--json", "x.json"])  # the run's: the bundle's over its own
    assert (config.seed, config.budget, config.mode, config.submission, config.task, config.json, config.argv[0]) == (
        7, 0.5, "benchmark", (str(path),), str((task / "task.yml").resolve()), "x.json", "--replay")
    assert config.replay == str(out) and config.replayed == tuple(bundle.read(out)["results"]["rows"])
    assert any("at their recorded paths" in note for note in config.replay_notes)
    args = build_parser().parse_args(["--replay", str(out), "--seed", "3"])
    with pytest.raises(bundle.BundleError, match="--seed does not go with it"):
        bundle.replay_args(bundle.read(out), args, tmp_path / "work", build_parser, local_tasks())
    args = build_parser().parse_args(["--replay", str(out), "--seed", "7", "--mode", "benchmark"])  # the bundle's own
    bundle.replay_args(bundle.read(out), args, tmp_path / "work", build_parser, local_tasks())


def test_the_comparison_marks_each_case_and_every_verdict():
    old = [{"submission": "a.py", "kind": "benchmark", "case": "c0", "case_ok": True, "median_us": 100.0,
            "ci95_rel": 0.01},
           {"submission": "a.py", "kind": "benchmark", "case": "c1", "case_ok": True, "median_us": 100.0,
            "ci95_rel": 0.01},
           {"submission": "a.py", "kind": "test", "case": "t0", "case_ok": True}]
    new = [{**old[0], "median_us": 100.5}, {**old[1], "median_us": 111.0}, {**old[2], "case_ok": False}]
    rows = bundle.comparison(old, new)
    assert [r.get("mark") for r in rows] == ["same", "slower", None]
    assert rows[1]["ratio"] == pytest.approx(1.11)
    line, same = bundle.summary(rows)
    assert not same and line == ("replay: 2 timed case(s): 1 same, 1 slower; verdicts: 1 of 3 changed (first: a.py "
                                 "test t0: pass -> FAIL)")
    assert bundle.summary(bundle.comparison(old, old)) == ("replay: 2 timed case(s): 2 same; verdicts: all 3 the "
                                                          "same", True)


def test_the_command_line_refuses_a_changed_submission_in_one_line(tmp_path, capsys):
    out, path, _ = made(tmp_path)
    path.write_text(SOURCE + "# edited\n")
    assert cli(tmp_path, "--replay", str(out)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: replay refused: the submission") and "mine.py" in err and "\n" not in err
    assert cli(tmp_path, "--mode", "history", "--energy") == 2
    assert "--energy goes with --mode benchmark or leaderboard" in capsys.readouterr().err


def test_results_round_trip_through_a_bundle(tmp_path):
    """The results a bundle holds are the --json document: a replay compares its rows."""
    from harness import report

    samples = (1e-4, 1.01e-4, 0.99e-4)
    r = SubmissionResult(str(tmp_path / "a.py"), "ab", cases=[
        CaseResult("benchmark", 0, "b0", True, args={"i": 0}, device=summarize(list(samples)), samples=samples)],
        audit="verified: the parent's clock")
    doc = report.json_document([r], lambda args: "c0", None, {"run": 1})
    rows = bundle.comparison(doc["rows"], report.export_rows([r], lambda args: "c0", None))
    assert bundle.summary(rows) == ("replay: 1 timed case(s): 1 same; verdicts: all 1 the same", True)


@pytest.mark.slow
def test_write_then_replay_gives_the_same_verdicts_and_a_changed_file_is_refused(tmp_path, capsys):
    """The round trip on the CPU: a leaderboard run of a copy of torch_batched.py with --bundle; its
    replay (from the file at its path, then from the bundle's copy once it is gone) gives every
    verdict again; an edited file refuses the replay before anything runs."""
    folder = tmp_path / "mine"
    folder.mkdir()
    path = folder / "torch_batched.py"
    shutil.copy(ROOT / "submissions" / "torch_batched.py", path)
    out = tmp_path / "run.json"
    assert cli(tmp_path, "--mode", "leaderboard", "--submission", str(path), "--budget", "0.05",
               "--bundle", str(out), "--seed", "41") == 0
    assert "replay bundle:" in capsys.readouterr().err
    data = bundle.read(out)
    assert data["seed"] == 41 and data["flags"]["budget"] == 0.05 and data["results"]["run"]["seed"] == 41
    for step in ("in place", "moved away"):
        if step == "moved away":
            path.rename(tmp_path / "elsewhere.py")
        assert cli(tmp_path, "--replay", str(out), "--json", str(tmp_path / f"{step}.json")) == 0, step
        captured = capsys.readouterr()
        assert "verdicts: all" in captured.err and "the same" in captured.err
        assert "Replay against the bundle" in captured.out
        assert json.loads((tmp_path / f"{step}.json").read_text())["run"]["seed"] == 41
    assert "1 from the bundle's copies" in captured.err
    path.write_text("# another file at the recorded path\n")
    assert cli(tmp_path, "--replay", str(out)) == 2
    assert "replay refused: the submission" in capsys.readouterr().err


@pytest.mark.slow
def test_two_files_of_one_name_replay_from_the_bundles_copies_with_the_same_verdicts(tmp_path, capsys):
    """Red-team pass 3: the replay's copies of a/x/f.py and b/x/f.py have other display names than the
    bundled run gave them; rows pair by the bundled names, so an honest replay reads the same."""
    paths = [tmp_path / "s" / side / "x" / "torch_batched.py" for side in ("a", "b")]
    for path in paths:
        path.parent.mkdir(parents=True)
        shutil.copy(ROOT / "submissions" / "torch_batched.py", path)
    out = tmp_path / "two.json"
    assert cli(tmp_path, "--mode", "test", "--submission", str(paths[0]), "--submission", str(paths[1]),
               "--bundle", str(out)) == 0
    (tmp_path / "s").rename(tmp_path / "gone")
    capsys.readouterr()
    assert cli(tmp_path, "--replay", str(out)) == 0
    err = capsys.readouterr().err
    assert "2 from the bundle's copies" in err and "verdicts: all" in err and "changed" not in err


def test_a_shape_with_a_5000_digit_number_is_one_line(tmp_path, capsys):
    assert cli(tmp_path, "--mode", "test", "--shape", "batchsize=" + "9" * 5000 + ",qseqlen=1,kvseqlen=64") == 2
    err = capsys.readouterr().err
    assert "expected KEY=VALUE pairs" in err and "Traceback" not in err


@pytest.mark.parametrize("stop, code, line", [(KeyboardInterrupt, 130, "interrupted"),
                                              ("terminated", 143, "terminated (SIGTERM)")])
def test_ctrl_c_or_sigterm_while_a_bundle_is_read_is_one_line(tmp_path, monkeypatch, capsys, stop, code, line):
    """Red-team: a signal while the command line's configuration (a --replay bundle, a task) is read."""
    import harness.cli as cli_module

    def interrupted(*_):
        raise cli_module.Terminated if stop == "terminated" else stop

    monkeypatch.setattr(cli_module, "configuration", interrupted)
    assert cli_module.main(["--replay", str(tmp_path / "b.json")]) == code
    err = capsys.readouterr().err
    assert line in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
