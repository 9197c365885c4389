"""The command line: modes, exit codes, errors a person can act on, the results database."""

import sqlite3

import pytest
from conftest import ROOT, ZOO, cli, processes_with

from harness.cli import main


@pytest.mark.parametrize("args,message", [
    (["--mode", "tset"], "unknown mode 'tset'"),
    (["--submission", "nope.py"], "nope.py: submission file not found"),
    (["--submission", str(ROOT / "task.yml")], "not a Python file"),
    (["--submission", str(ROOT / "submissions")], "is a folder"),
    (["--history", "--mode", "test"], "--history goes with --mode leaderboard"),
    (["--task", "missing.yml"], "missing.yml"),
    (["--check", "lenient"], "unknown check policy 'lenient'"),
])
def test_bad_usage_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    assert cli(tmp_path, *args) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


@pytest.mark.parametrize("name, message", [
    (b"\xff\xfe_kernel.py", "path not valid UTF-8; rename the file"),
    (b"ok\x1b[2J\x1b]0;all passed\x07x.py", "path holds control characters; rename the file"),
    (b"fine\n# Verified by the harness\nx.py", "path holds control characters; rename the file"),
    (b"torch_batched[i].py", "torch_batched[i].py: path holds [ ], which the reports would read as markup"),
    (b"k$\\x$.py", "path holds $, which the reports would read as markup"),
])
def test_a_submission_path_that_cannot_be_shown_as_it_is_is_refused(tmp_path, capsys, monkeypatch, name, message):
    """A file name is its submitter's choice; one with undecodable bytes crashed the database write
    after the run, one with escapes or line breaks spoofed the report and the exports. Refused
    before anything runs, whether named or found in the submissions folder, with the name shown
    escaped."""
    import os

    folder = tmp_path / "submissions"
    folder.mkdir()
    path = os.path.join(os.fsencode(folder), name)
    with open(path, "w") as f:
        f.write("def custom_kernel(data):\n    return data\n")
    for args in (["--submission", os.fsdecode(path)], []):
        monkeypatch.chdir(tmp_path)
        assert cli(tmp_path, "--mode", "test", *args) == 2
        err = capsys.readouterr().err
        assert message in err and "\x1b" not in err and len(err.strip().splitlines()) == 1
    db = tmp_path / "r.db"
    assert not db.exists() or sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_empty_submissions_folder(tmp_path, capsys, monkeypatch):
    (tmp_path / "submissions").mkdir()
    monkeypatch.chdir(tmp_path)
    assert cli(tmp_path, "--mode", "test") == 2
    assert "no submissions (*.py) found" in capsys.readouterr().err


def test_unwritable_log_folder(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main(["--mode", "test", "--db", str(tmp_path / "r.db"), "--logs", str(blocker / "logs"),
                 "--submission", str(ROOT / "submissions" / "torch_batched.py")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{blocker / 'logs'}: cannot create the folder for worker logs" in err and "Traceback" not in err


def test_unwritable_db(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["--db", str(blocker / "sub" / "r.db"), "--mode", "test"]) == 2
    assert "cannot open the results database" in capsys.readouterr().err


@pytest.mark.slow
def test_leaderboard_goes_on_after_a_crash_and_ranks(tmp_path, capsys):
    code = cli(tmp_path, "--mode", "leaderboard", "--submission", str(ZOO / "segfault.py"),
               "--submission", str(ROOT / "submissions" / "torch_batched.py"))
    assert code == 1  # one requested submission failed
    out = capsys.readouterr().out
    assert "torch_batched.py" in out and "pass" in out
    assert "segfault.py" in out and "SIGSEGV" in out
    db = sqlite3.connect(tmp_path / "r.db")
    rows = dict(db.execute("SELECT name, ok FROM submissions").fetchall())
    assert rows == {"segfault.py": 0, "torch_batched.py": 1}
    assert db.execute("SELECT status FROM runs").fetchall() == [("complete",)]
    # and the best-of-history view finds the passing one
    assert cli(tmp_path, "--mode", "leaderboard", "--history") == 0
    assert "torch_batched.py" in capsys.readouterr().out


def test_test_mode_exit_0_when_all_pass(tmp_path, capsys):
    assert cli(tmp_path, "--mode", "test", "--submission", str(ROOT / "submissions" / "torch_loop.py")) == 0
    assert "No GPU in use" in capsys.readouterr().err


def test_profile_mode_prints_kernel_table(tmp_path, capsys):
    assert cli(tmp_path, "--mode", "profile", "--submission", str(ROOT / "submissions" / "torch_batched.py")) == 0
    out = capsys.readouterr().out
    assert "aten::bmm" in out and "Self CPU" in out
    header = next(line for line in out.splitlines() if "Self CPU" in line)  # a table, not one collapsed line
    assert "aten::bmm" not in header and "  " in header


def test_static_scan_flags_for_review_without_blocking(tmp_path, capsys):
    import json

    code = cli(tmp_path, "--mode", "test", "--submission", str(ZOO / "prints_results.py"),
               "--submission", str(ROOT / "submissions" / "torch_batched.py"))
    assert code == 0  # flagged, yet passing: the scan informs, the runtime checks decide
    out = capsys.readouterr().out
    assert "FAKE_BENCHMARK_EMIT" in out
    db = sqlite3.connect(tmp_path / "r.db")
    scan, flags = db.execute("SELECT scan, flags FROM submissions WHERE name = 'prints_results.py'").fetchone()
    assert scan == "hacked" and any("FAKE_BENCHMARK_EMIT" in f for f in json.loads(flags))


def test_exports_hold_every_number(tmp_path):
    import csv
    import json

    paths = {ext: tmp_path / f"r.{ext}" for ext in ("json", "csv", "md")}
    code = cli(tmp_path, "--mode", "benchmark", "--budget", "0.1", "--submission", str(ROOT / "submissions" / "torch_batched.py"),
               "--json", str(paths["json"]), "--csv", str(paths["csv"]), "--markdown", str(paths["md"]))
    assert code == 0
    doc = json.loads(paths["json"].read_text())
    assert doc["run"]["mode"] == "benchmark" and len(doc["rows"]) == 3
    row = doc["rows"][0]
    for key in ("median_us", "mean_us", "std_us", "min_us", "max_us", "runs", "host_us", "gbps", "bytes",
                "geomean_us", "reads", "warnings", "detail"):
        assert key in row
    assert row["reads"] == "bf16" and row["median_us"] > 0 and row["bytes"] > 0
    assert len(row["samples_us"]) == row["runs"] and sorted(row["samples_us"])[len(row["samples_us"]) // 2] > 0
    assert row["launch_bound_calls"] == []                               # the CPU has no start event to pass
    assert doc["run"]["seed"] > 0 and "git_commit" in doc["run"] and doc["run"]["task"] == "amd-mixed-mla"
    rows = list(csv.DictReader(paths["csv"].open()))
    assert [r["case"] for r in rows] == [r["case"] for r in doc["rows"]] and "samples_us" not in rows[0]
    assert "launch_bound_calls" not in rows[0]
    assert float(rows[0]["median_us"]) == pytest.approx(row["median_us"])
    md = paths["md"].read_text()
    assert "| torch_batched.py |" in md and "median_us" in md
    assert "| torch_batched.py | True | False |" in md and "ranked_by: unverified: CPU" in md  # CPU: unverified


def test_variant_detection(tmp_path):
    from harness.parent.scan import declared_variant

    formats = ["bf16", "fp8", "mxfp4"]
    (tmp_path / "a.py").write_text('KV_FORMAT = "mxfp4"\n')
    (tmp_path / "b.py").write_text('def custom_kernel(d):\n    kv, s = d[1]["fp8"]\n')
    (tmp_path / "c.py").write_text('def custom_kernel(d):\n    return d[1]["fp8"], d[1]["bf16"]\n')
    assert [declared_variant(tmp_path / f"{n}.py", formats) for n in "abc"] == ["mxfp4", "fp8", "bf16+fp8"]
    # two formats (mxfp4 keys, fp8 values), declared or read; three read: the widest
    (tmp_path / "d.py").write_text('KV_FORMAT = "fp8+mxfp4"\n')
    (tmp_path / "e.py").write_text('def custom_kernel(d):\n    return d[1]["mxfp4"], d[1]["fp8"]\n')
    (tmp_path / "f.py").write_text('def custom_kernel(d):\n    return d[1]["mxfp4"], d[1]["fp8"], d[1]["bf16"]\n')
    (tmp_path / "g.py").write_text('KV_FORMAT = "fp8+int4"\n')
    assert [declared_variant(tmp_path / f"{n}.py", formats) for n in "defg"] == ["fp8+mxfp4", "fp8+mxfp4", "bf16", "bf16"]
    # as Python reads the file: a byte-order mark, an annotation, the last assignment winning
    (tmp_path / "h.py").write_bytes(b'\xef\xbb\xbfKV_FORMAT = "fp8"\n')
    (tmp_path / "i.py").write_text('KV_FORMAT: str = "mxfp4"\n')
    (tmp_path / "j.py").write_text('KV_FORMAT = "fp8"\nKV_FORMAT = "mxfp4"\n')
    assert [declared_variant(tmp_path / f"{n}.py", formats) for n in "hij"] == ["fp8", "mxfp4", "mxfp4"]


def test_the_worker_runs_the_source_not_a_cached_bytecode_beside_it(tmp_path):
    """Red-team pass 13: Python's loader runs `__pycache__/NAME.cpython-XY.pyc` instead of the source,
    and an unchecked-hash one is never compared with it: the parent would hash and scan one file while
    another ran. The loader compiles the source's own bytes."""
    import importlib.util
    import py_compile

    from harness.worker.loop import load_module

    (tmp_path / "hidden.py").write_text("ANSWER = 'the bytecode'\n")
    (tmp_path / "sub.py").write_text("ANSWER = 'the source'\n")
    cached = importlib.util.cache_from_source(str(tmp_path / "sub.py"))
    py_compile.compile(str(tmp_path / "hidden.py"), cfile=cached,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    spec = importlib.util.spec_from_file_location("probe_pyc", tmp_path / "sub.py")
    plain = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plain)
    assert plain.ANSWER == "the bytecode"  # (what Python's own loader does)
    assert load_module(tmp_path / "sub.py", "probe_source").ANSWER == "the source"


def test_two_formats_move_the_bytes_of_both(problem):
    import torch

    data = problem.generate({"batchsize": 2, "qseqlen": 1, "kvseqlen": 64, "seed": 1}, 1, torch.device("cpu"))
    moved = problem.bytes_moved(data)
    assert moved["mxfp4"] < moved["fp8+mxfp4"] < moved["fp8"] + moved["mxfp4"]
    assert moved["fp8"] < moved["fp8+mxfp4"] and moved["bf16+fp8"] > moved["bf16"]


@pytest.mark.slow
def test_history_and_compare(tmp_path, capsys):
    sub = str(ROOT / "submissions" / "torch_batched.py")
    for _ in range(2):
        assert cli(tmp_path, "--mode", "benchmark", "--budget", "0.1", "--submission", sub) == 0
    capsys.readouterr()
    assert cli(tmp_path, "--mode", "history") == 0
    out = capsys.readouterr().out
    assert "complete" in out and "1/1" in out
    assert cli(tmp_path, "--mode", "history", "--compare", "1", "2") == 0
    out = capsys.readouterr().out
    assert out.count("torch_batched.py") == 3 and "B / A" in out
    assert "2×128" in out and "batchsize: " not in out  # the cases' short labels, as every table shows them
    assert cli(tmp_path, "--mode", "leaderboard", "--history") == 0   # benchmark runs skipped the tests
    assert "torch_batched.py" not in capsys.readouterr().out
    assert cli(tmp_path, "--mode", "leaderboard", "--budget", "0.1", "--submission", sub) == 0
    capsys.readouterr()
    assert cli(tmp_path, "--mode", "leaderboard", "--history") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "torch_batched.py" in out and "median of runs" in out and "CPU wall clock, unverified" in out and "strict" in out
    assert cli(tmp_path, "--mode", "test", "--submission", sub) == 0
    capsys.readouterr()
    assert cli(tmp_path, "--mode", "history", "--compare", "4", "4") == 0
    assert "no timed case is in both runs" in " ".join(capsys.readouterr().out.split())
    assert cli(tmp_path, "--mode", "history", "--compare", "1", "9") == 2
    assert "there is no run 9" in capsys.readouterr().err
    assert cli(tmp_path, "--mode", "test", "--compare", "1", "2") == 2


def test_compare_marks_are_noise_aware():
    from harness.report import compare_marks

    assert compare_marks(100.0, 0.01, 80.0, 0.01) == "faster"
    assert compare_marks(100.0, 0.01, 120.0, 0.01) == "slower"
    assert compare_marks(100.0, 0.10, 95.0, 0.10) == "same"   # within the noise
    assert compare_marks(100.0, 0.9, 1060.0, 1.2) == "too noisy"  # a 10.6x change inside ±90% / ±120% intervals


@pytest.mark.slow
def test_plots_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plots"
    assert cli(tmp_path, "--mode", "benchmark", "--budget", "0.1", "--plot", str(out),
               "--submission", str(ROOT / "submissions" / "torch_batched.py")) == 0
    for name in ("leaderboard.png", "roofline.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_vendor_profiler_commands_and_messages(monkeypatch, tmp_path):
    import harness.parent.vendor_profile as vp

    monkeypatch.setattr(vp.shutil, "which", lambda name: None)
    with pytest.raises(vp.ProfilerMissing, match="Nsight Compute \\(ncu\\) is not installed"):
        vp.tool_command("ncu", "nvidia", tmp_path / "r")
    with pytest.raises(vp.ProfilerMissing, match="neither rocprofv3 nor rocprof"):
        vp.tool_command("rocprof", "amd", tmp_path / "r")
    with pytest.raises(vp.ProfilerMissing, match="use --rocprof on AMD"):
        vp.tool_command("ncu", "amd", tmp_path / "r")
    monkeypatch.setattr(vp.shutil, "which", lambda name: f"/opt/bin/{name}")
    cmd = vp.tool_command("ncu", "nvidia", tmp_path / "r")
    assert cmd[0] == "/opt/bin/ncu" and ["--clock-control", "none"] == cmd[1:3] and "--profile-from-start" in cmd
    assert vp.tool_command("rocprof", "amd", tmp_path / "r")[0] == "/opt/bin/rocprofv3"


def test_vendor_profile_child_makes_one_call(capsys):
    from harness.worker.profiled import main as profile_one

    assert profile_one(["--task", str(ROOT / "task.yml"), "--submission", str(ROOT / "submissions" / "torch_loop.py"),
                        "--case", "0", "--small"]) == 0
    assert "profiled one call of torch_loop.py" in capsys.readouterr().out


def test_ncu_on_cpu_is_a_clear_error(tmp_path, capsys):
    assert cli(tmp_path, "--mode", "profile", "--ncu", "--submission", str(ROOT / "submissions" / "torch_loop.py")) == 2
    assert "--ncu profiles NVIDIA GPUs; this device is cpu" in capsys.readouterr().err


def test_ncu_summary_is_cut_to_key_rows():
    from harness.parent.vendor_profile import key_rows

    summary = """  _mla_decode_kernel (64, 16, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    ------------------------------- ----------- ------- ------- -------
    Metric Name                     Metric Unit Minimum Maximum Average
    DRAM Frequency                          Ghz    3.19    3.19    3.19
    Duration                                 us   10.50   10.50   10.50
    Memory Throughput                         %   20.50   20.50   20.50
    Registers Per Thread        register/thread  255.00  255.00  255.00
    Achieved Occupancy                        %    6.24    6.24    6.24
"""
    rows = key_rows(summary).splitlines()
    assert rows[0].startswith("_mla_decode_kernel (64, 16, 1)")
    assert [r.split()[0] for r in rows[1:]] == ["Duration", "Memory", "Registers", "Achieved"]
    assert "DRAM Frequency" not in key_rows(summary)
    assert key_rows("no metrics here") == "no metrics here"
    summary_style = "  _combine_splits_kernel (16, 8, 1)x(128, 1, 1), Device 0, CC 9.0, Invocations 1\n" \
                    "    Duration                                 us    4.32    4.32    4.32\n"
    assert key_rows(summary_style).splitlines() == ["_combine_splits_kernel (16, 8, 1)x(128, 1, 1), Device 0, CC 9.0, "
                                                    "Invocations 1", "    Duration us 4.32 4.32 4.32"]


def test_an_unknown_flag_is_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--mdoe", "test"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "unrecognized arguments: --mdoe" in err


@pytest.mark.parametrize("flag", ["--json", "--csv", "--markdown"])
def test_an_export_into_a_missing_folder_stops_before_any_work(tmp_path, capsys, flag):
    target = tmp_path / "nowhere" / "out"
    code = cli(tmp_path, "--mode", "test", flag, str(target), "--submission", str(ROOT / "submissions" / "torch_batched.py"))
    assert code == 2
    err = capsys.readouterr().err
    assert f"{flag} {target}: the folder {target.parent} does not exist" in err
    assert not (tmp_path / "r.db").exists() or not sqlite3.connect(tmp_path / "r.db").execute(
        "SELECT COUNT(*) FROM submissions").fetchone()[0]


def test_submissions_with_one_file_name_are_told_apart(tmp_path, capsys):
    import shutil

    from harness.report.store import Store

    for folder, source in (("alice", ROOT / "submissions" / "torch_batched.py"), ("bob", ZOO / "zeros.py")):
        (tmp_path / folder).mkdir()
        shutil.copy(source, tmp_path / folder / "kernel.py")
    assert cli(tmp_path, "--mode", "test", "--submission", str(tmp_path / "alice" / "kernel.py"),
               "--submission", str(tmp_path / "bob" / "kernel.py")) == 1
    out = capsys.readouterr()
    assert "alice/kernel.py" in out.out and "bob/kernel.py" in out.out
    db = Store(str(tmp_path / "r.db")).db
    assert sorted(n for (n,) in db.execute("SELECT name FROM submissions")) == ["alice/kernel.py", "bob/kernel.py"]
    logs = sorted((tmp_path / "logs").glob("kernel.*.log"))
    assert len(logs) == 2  # one log each


def test_one_custom_shape_and_a_short_timeout(tmp_path, capsys):
    import time

    code = cli(tmp_path, "--mode", "test", "--shape", "batchsize=2,qseqlen=1,kvseqlen=40",
               "--shape", "batchsize=3, qseqlen=2, kvseqlen=9, kvseqlens=[9, 1, 4]",
               "--submission", str(ROOT / "submissions" / "torch_batched.py"))
    out = capsys.readouterr().out
    assert code == 0 and "2×40" in out and out.count("│ pass") == 2
    start = time.monotonic()
    assert cli(tmp_path, "--mode", "test", "--timeout", "3", "--shape", "batchsize=2,qseqlen=1,kvseqlen=40",
               "--submission", str(ZOO / "hangs.py")) == 1
    assert time.monotonic() - start < 60
    assert "timeout" in capsys.readouterr().out.lower()


@pytest.mark.parametrize("args, message", [
    (["--shape", "batchsize=2,qseqlen=1"], "--shape 'batchsize=2,qseqlen=1'.kvseqlen: missing"),
    (["--shape", "batch=2,qseqlen=1,kvseqlen=4"], "batch: unknown key"),
    (["--shape", "what"], "--shape 'what': expected KEY=VALUE pairs"),
    (["--timeout", "0"], "--timeout must be a positive number of seconds"),
    (["--shape", "batchsize=2,qseqlen=1,kvseqlen=0"], "kvseqlen must be a whole number of at least 1, got 0"),
    (["--shape", "batchsize=2,qseqlen=1,kvseqlen=2.5"], "kvseqlen must be a whole number of at least 1, got 2.5"),
    (["--shape", "batchsize=4096,qseqlen=1,kvseqlen=100000"], "over the 4,194,304 allowed"),
    (["--shape", "batchsize=2,qseqlen=1,kvseqlen=4,seed=9223372036854775808"], "seed must be a whole number"),
    (["--shape", "batchsize=2,qseqlen=1,kvseqlen=4", "--shape", "batchsize=2,qseqlen=1,kvseqlen=-4"],
     "--shape 'batchsize=2,qseqlen=1,kvseqlen=-4': kvseqlen must be"),
    (["--seed", str(2**63)], "--seed 9223372036854775808: expected a whole number from -2**63"),
    (["--shape", "batchsize=1,qseqlen=1,kvseqlen=4,device=meta"], "device: set by the harness, not by a case"),
    (["--budget", "nan"], "--budget must be a positive, finite number of seconds"),
    (["--budget", "inf"], "--budget must be a positive, finite number of seconds"),
])
def test_bad_shape_or_timeout_is_one_line(tmp_path, capsys, args, message):
    assert cli(tmp_path, "--mode", "test", *args, "--submission", str(ZOO / "zeros.py")) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_speedup_over_a_baseline(tmp_path, capsys):
    code = cli(tmp_path, "--mode", "benchmark", "--budget", "0.1", "--baseline", str(ROOT / "submissions" / "torch_loop.py"),
               "--submission", str(ROOT / "submissions" / "torch_batched.py"))
    assert code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Speedup over torch_loop.py" in out and "torch_batched.py" in out and "×" in out
    assert cli(tmp_path, "--mode", "test", "--baseline", str(ZOO / "zeros.py")) == 2
    assert "--baseline goes with --mode benchmark or leaderboard" in capsys.readouterr().err


@pytest.mark.slow
def test_sigterm_ends_the_run_as_ctrl_c_does(tmp_path):
    """SIGTERM during a run (a scheduler, `timeout`, a cancelled CI job): one line and exit 143, the
    run marked interrupted (not left running), its worker gone and no scratch folder left."""
    import os
    import signal
    import subprocess
    import sys
    import time

    scratch, db = tmp_path / "tmp", tmp_path / "r.db"
    scratch.mkdir()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "eval.py"), "--mode", "test", "--device", "cpu", "--no-progress", "--db", str(db),
         "--logs", str(tmp_path / "logs"), "--submission", str(ZOO / "hangs.py")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=str(scratch)))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not _stored_runs(db):
            time.sleep(0.2)
        time.sleep(3)  # the worker loads the submission and enters its first call (which never returns)
        assert proc.poll() is None and _stored_runs(db) == ["running"] and any(scratch.iterdir())
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
    assert _stored_runs(db) == ["interrupted"]
    assert list(scratch.iterdir()) == []
    assert processes_with(str(ZOO / "hangs.py")) == []


def _stored_runs(db) -> list[str]:
    try:
        return [status for (status,) in sqlite3.connect(db).execute("SELECT status FROM runs")]
    except sqlite3.Error:  # not made yet
        return []


def test_a_submission_the_parent_will_not_read_is_one_line_before_anything_runs(tmp_path, capsys):
    """Red-team pass 13: the parent read a submission whole, unsandboxed, to hash and parse it: a named
    pipe blocked it for good, a link to /dev/zero filled its memory, a large file cost ~0.5 GB per MB
    to parse; a link's file lives in another folder than the one the sandbox hides."""
    import os

    (tmp_path / "pipe.py").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    (tmp_path / "big.py").write_text("X = 1\n" + "#" * (1 << 20))
    (tmp_path / "folder.py").mkdir()
    (tmp_path / "real.py").write_text((ZOO / "zeros.py").read_text())
    (tmp_path / "link.py").symlink_to(tmp_path / "real.py")
    for name, message in (("pipe.py", "is not a regular file"), ("zero.py", "is a symbolic link"),
                          ("big.py", "is 1,048,582 bytes, over the 524,288 a submission may have"), ("folder.py", "is a folder"),
                          ("link.py", "is a symbolic link")):
        assert cli(tmp_path, "--mode", "test", "--submission", str(ZOO / "zeros.py"),
                   "--submission", str(tmp_path / name)) == 2, name
        err = capsys.readouterr().err
        assert f"{tmp_path / name}: {message}" in err and len(err.strip().splitlines()) == 1, err


def test_history_of_a_database_that_is_not_there_is_one_line(tmp_path, capsys):
    assert cli(tmp_path, "--mode", "history", "--db", str(tmp_path / "none" / "r.db")) == 2
    assert "no database there" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()


def test_a_file_that_ends_the_harness_gpu_context_fails_and_the_rest_say_not_run(tmp_path, capsys, monkeypatch):
    """Under MPS a worker's GPU fault (or a worker killed mid-kernel) ends every client's context,
    the harness's included, and a new client gets no GPU while the harness lives (H200,
    lab/mps_fault_probe.py): the file that ran is failed with that reason, the later ones are
    stored as not run, never evaluated elsewhere (a fresh evaluator fell back to the CPU)."""
    from harness import device

    monkeypatch.setattr(device, "context_ok", lambda info: False)
    first, second = ROOT / "submissions" / "torch_batched.py", ROOT / "submissions" / "torch_loop.py"
    code = cli(tmp_path, "--mode", "test", "--submission", str(first), "--submission", str(second))
    assert code == 1
    err = capsys.readouterr().err
    assert "torch_batched.py ended the harness's GPU context: the remaining 1 file(s) are not run" in err
    db = sqlite3.connect(tmp_path / "r.db")
    rows = dict(db.execute("SELECT name, error FROM submissions").fetchall())
    assert rows["torch_batched.py"] == device.CONTEXT_LOST
    assert rows["torch_loop.py"] == "not run: the harness's GPU context was lost while torch_batched.py ran"


def _namespace_writes(tree) -> list[int]:
    """Lines of `tree` that write to a parsed argparse Namespace, which harness/ names `args`: an
    attribute assigned or deleted (`args.x = ...`, `args.x += ...`, `(args.x,) = ...`), setattr /
    delattr on it, or its dictionary written (`vars(args)[...] = ...`, `vars(args).update(...)`)."""
    import ast

    def is_args(node) -> bool:
        return isinstance(node, ast.Name) and node.id == "args"

    def is_args_dict(node) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars"
                and node.args and is_args(node.args[0])) or (isinstance(node, ast.Attribute)
                                                              and node.attr == "__dict__" and is_args(node.value))

    def written(target) -> bool:
        if isinstance(target, (ast.Tuple, ast.List)):
            return any(written(t) for t in target.elts)
        if isinstance(target, ast.Starred):
            return written(target.value)
        return (isinstance(target, ast.Attribute) and is_args(target.value)) or (
            isinstance(target, ast.Subscript) and is_args_dict(target.value))

    lines = []
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        if any(written(t) for t in targets):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and node.args and (
                (isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") and is_args(node.args[0]))
                or (isinstance(node.func, ast.Attribute) and is_args_dict(node.func.value))):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_harness_module_changes_the_parsed_command_line():
    """The command line is parsed once and turned into one frozen RunConfig (harness/cli/flags.py
    `configuration`); nothing writes to the parsed Namespace, before or after."""
    import ast

    written = [f"{path.relative_to(ROOT)}:{line}" for path in sorted((ROOT / "harness").rglob("*.py"))
               for line in _namespace_writes(ast.parse(path.read_text()))]
    assert not written, f"the parsed command line is written to at {', '.join(written)}"
    assert _namespace_writes(ast.parse("args.shape = 1\n(args.baseline,) = x\nsetattr(args, 'a', 1)\n"
                                       "vars(args)['b'] = 2\nargs.c += 1\n")) == [1, 2, 3, 4, 5]


def test_one_configuration_holds_every_flag_and_the_context_copies_none(tmp_path):
    """Every flag has its field in RunConfig, named as its argparse dest; the engine's RunContext
    holds the configuration rather than copies of its fields (its `device` is the device found, beside
    the flag's choice); building the configuration leaves the parsed command line as it was."""
    import dataclasses

    from harness.config import RunConfig, RunContext
    from harness.cli.flags import build_parser, configuration

    fields = {f.name for f in dataclasses.fields(RunConfig)}
    dests = {action.dest for action in build_parser()._actions if action.dest != "help"}
    assert dests <= fields, sorted(dests - fields)
    assert {f.name for f in dataclasses.fields(RunContext)} & fields == {"device"}
    argv = ["--mode", "test", "--shape", "batchsize=2", "--submission", "a.py", "--db", str(tmp_path / "r.db")]
    args = build_parser().parse_args(argv)
    before = dict(vars(args))
    config = configuration(args, argv)
    assert vars(args) == before
    assert (config.mode, config.shape, config.submission, config.db, config.argv) == (
        "test", ("batchsize=2",), ("a.py",), str(tmp_path / "r.db"), tuple(argv))
    assert config.logs.endswith("logs") and isinstance(config.seed, int) and config.task.endswith("task.yml")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.mode = "benchmark"
