"""The paths a new user takes first: a hung or crashed file costs one case timeout (and the default
timeouts are shown), the results database does not move with the working folder, and files are
chosen with glob patterns and --exclude."""

import time

import pytest
import yaml
from conftest import ROOT, ZOO, cli

from harness import cli as cli_module
from harness.report import store
from harness.cli import main, resolve_submissions
from harness.config import UsageError


@pytest.fixture
def short_task(tmp_path):
    """The default task with a 3 s test-case timeout (the worker's start keeps its own 120 s), its
    reference and companion the checkout's."""
    raw = yaml.safe_load((ROOT / "task.yml").read_text())
    raw["timeouts"]["test_case"] = 3
    raw["reference"] = str(ROOT / "reference.py")
    raw["companion"] = str(ROOT / "tasks" / "competition" / "task.yml")
    task = tmp_path / "task" / "task.yml"
    task.parent.mkdir()
    task.write_text(yaml.safe_dump(raw))
    return task


@pytest.mark.parametrize("name, reason", [("hangs.py", "timeout: timed out after 3 s"),
                                          ("segfault.py", "crashed: worker process killed by SIGSEGV")])
def test_a_hung_or_crashed_file_costs_one_case_timeout_and_is_not_run_again(tmp_path, capsys, short_task, name,
                                                                            reason):
    """A file whose first test case hangs (or crashes) fails on that case once; it is not evaluated
    again on the task's companion (which a wrong answer gets), so a hang costs its case timeout and
    the worker's start, no more."""
    start = time.monotonic()
    assert cli(tmp_path, "--mode", "test", "--task", str(short_task), "--submission", str(ZOO / name)) == 1
    wall = time.monotonic() - start
    out, err = capsys.readouterr()
    assert wall < 3 + 10, wall
    assert [line for line in out.splitlines() if reason in line], out
    assert "competition" not in err and not (tmp_path / "logs" / "companion").exists(), err
    assert "timeouts: worker start 120 s, test case 3 s, benchmark case 180 s (the task's;" in err


def test_the_default_timeouts_are_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: the task's own (" in text and "test case 120 s, benchmark case 180 s)" in text


def _checkout(folder):
    (folder / "harness").mkdir(parents=True)
    (folder / "harness" / "__init__.py").write_text("")
    (folder / "pyproject.toml").write_text("")
    return folder


def test_the_results_folder_is_the_checkouts_from_any_of_its_folders(tmp_path, monkeypatch):
    checkout = _checkout(tmp_path / "checkout")
    deep = checkout / "submissions" / "mine"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert store.results_folder() == checkout / "results"
    assert store.results_folder(checkout) == checkout / "results"
    # outside any checkout: the checkout this code runs from
    monkeypatch.chdir(tmp_path)
    assert store.results_folder() == ROOT / "results"


def test_an_installed_copy_outside_a_checkout_keeps_results_in_the_users_data_folder(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"  # an installed copy: harness/ without pyproject.toml
    (site / "harness").mkdir(parents=True)
    (site / "harness" / "cli.py").write_text("")
    (tmp_path / "work").mkdir()
    monkeypatch.setattr(store, "CODE_ROOT", site)
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert store.results_folder() == tmp_path / "home" / ".local" / "share" / "mla-eval"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/data")  # not absolute: ignored, as the XDG spec says
    assert store.results_folder() == tmp_path / "home" / ".local" / "share" / "mla-eval"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert store.results_folder() == tmp_path / "data" / "mla-eval"
    assert store.results_folder(site) == tmp_path / "data" / "mla-eval"


def test_a_run_and_history_print_the_database_they_use(tmp_path, monkeypatch, capsys):
    """From a subfolder of a checkout, with no --db: the checkout's results/, named after the run
    and by --history; --history of a database that is not there yet is one line naming it."""
    checkout = _checkout(tmp_path / "checkout")
    (checkout / "sub").mkdir()
    monkeypatch.chdir(checkout / "sub")
    db = checkout / "results" / "mla-eval.db"
    assert main(["--no-progress", "--device", "cpu", "--mode", "leaderboard", "--history"]) == 2
    err = capsys.readouterr().err
    assert f"{db}: no database there" in err and len(err.strip().splitlines()) == 1
    assert main(["--no-progress", "--device", "cpu", "--mode", "test", "--shape", "batchsize=2,qseqlen=1,kvseqlen=40",
                 "--submission", str(ROOT / "submissions" / "torch_batched.py")]) == 0
    assert f"results stored in {db} (run 1)" in " ".join(capsys.readouterr().err.split())
    assert list((checkout / "results" / "logs").glob("torch_batched.*.log"))
    for args in (["--mode", "leaderboard", "--history"], ["--mode", "history"]):
        assert main(args) == 0
        assert f"database: {db}" in capsys.readouterr().err


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A folder of submissions and a helper module, the working folder its parent."""
    folder = tmp_path / "subs"
    folder.mkdir()
    for name in ("a.py", "b_x.py", "b_y.py", "_helper.py"):
        (folder / name).write_text("def custom_kernel(data):\n    return data\n")
    monkeypatch.chdir(tmp_path)
    return folder


def test_glob_patterns_choose_submissions_and_leave_helpers_out(files):
    assert resolve_submissions(["subs/b_*.py"]) == [files / "b_x.py", files / "b_y.py"]
    assert resolve_submissions(["subs/*.py"]) == [files / n for n in ("a.py", "b_x.py", "b_y.py")]
    assert resolve_submissions(["subs/_*.py"]) == [files / "_helper.py"]  # named by its own pattern
    assert resolve_submissions(["subs/b_*.py", "subs/*_y.py"]) == [files / "b_x.py", files / "b_y.py"]
    with pytest.raises(UsageError, match=r"^--submission subs/c_\*\.py: no \.py file matches this pattern$"):
        resolve_submissions(["subs/c_*.py"])


def test_exclude_leaves_out_what_it_matches(files):
    every = ["subs/*.py"]
    assert resolve_submissions(every, ["b_*.py"]) == [files / "a.py"]
    assert resolve_submissions(every, ["subs/b_x.py", str(files / "a.py")]) == [files / "b_y.py"]
    assert resolve_submissions(every, ["*_y*"]) == [files / "a.py", files / "b_x.py"]
    files.rename(files.parent / "submissions")  # the default folder, in the working folder
    assert resolve_submissions([], ["b_*"]) == [files.parent / "submissions" / "a.py"]
    with pytest.raises(UsageError, match=r"^--exclude c\*: matches none of the 3 submission\(s\)$"):
        resolve_submissions([], ["c*"])
    with pytest.raises(UsageError, match="leaves no submission to evaluate"):
        resolve_submissions([], ["*.py"])


def test_patterns_reach_the_run_and_bad_ones_are_one_line(tmp_path, files, monkeypatch, capsys):
    chosen = []
    monkeypatch.setattr(cli_module, "_on_device", lambda args, store, problem, submissions, early:
                        chosen.append(submissions) or 0)
    assert cli(tmp_path, "--mode", "test", "--sandbox", "off", "--submission", "subs/*.py", "--exclude", "a.py") == 0
    assert chosen == [[files / "b_x.py", files / "b_y.py"]]
    for args, message in ((["--submission", "subs/z*.py"], "--submission subs/z*.py: no .py file matches"),
                          (["--submission", "subs/*.py", "--exclude", "z*"], "--exclude z*: matches none"),
                          (["--submission", "subs/a.py", "--exclude", "."], "--exclude '.': not a file pattern")):
        assert cli(tmp_path, "--mode", "test", *args) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
