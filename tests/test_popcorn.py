"""The popcorn protocol, driven exactly as kernelbot's runner drives GPU MODE's eval.py: a pipe
passed as POPCORN_FD, POPCORN_SEED in the environment, `python eval.py MODE TESTFILE` run in a
folder holding submission.py."""

import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, ZOO, log_of

from harness.cli.popcorn import BadTestFile, parse_testfile

CASES = "batchsize: 2; qseqlen: 1; kvseqlen: 64; seed: 5\nbatchsize: 3; qseqlen: 1; kvseqlen: 40; kvseqlens: 1,40,17; seed: 6\n"


def kernelbot(tmp_path, mode, submission, cases=CASES, seed="4242", extra=()):
    work = tmp_path / "run"
    work.mkdir(exist_ok=True)
    shutil.copy(submission, work / "submission.py")
    (work / "tests.txt").write_text(cases)
    read_end, write_end = os.pipe()
    env = {k: v for k, v in os.environ.items() if not k.startswith("POPCORN")}
    env.update({"POPCORN_FD": str(write_end), "POPCORN_SEED": seed})
    proc = subprocess.Popen([sys.executable, str(ROOT / "eval.py"), mode, "tests.txt", "--budget", "0.3", *extra],
                            cwd=work, env=env, pass_fds=(write_end,), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        lines = pipe.read().splitlines()
    out, err = proc.communicate(timeout=600)
    result = dict(line.split(": ", 1) for line in lines)  # kernelbot splits at the first ':'
    return proc.returncode, result, lines, out + err, work


@pytest.mark.slow
def test_test_mode_lines(tmp_path):
    code, result, _, _, _ = kernelbot(tmp_path, "test", ROOT / "submissions" / "torch_batched.py")
    assert code == 0
    assert result["test-count"] == "2" and result["check"] == "pass"
    assert result["test.0.spec"] == "batchsize: 2; qseqlen: 1; kvseqlen: 64; seed: 5"
    assert result["test.1.spec"].endswith("kvseqlens: 1,40,17; seed: 6")
    assert result["test.0.status"] == result["test.1.status"] == "pass"


@pytest.mark.slow
def test_benchmark_mode_lines_in_nanoseconds(tmp_path):
    code, result, _, _, _ = kernelbot(tmp_path, "benchmark", ROOT / "submissions" / "torch_batched.py")
    assert code == 0 and result["benchmark-count"] == "2" and result["check"] == "pass"
    for key in ("runs", "mean", "std", "err", "best", "worst"):
        assert f"benchmark.0.{key}" in result
    mean, best, worst = (float(result[f"benchmark.0.{k}"]) for k in ("mean", "best", "worst"))
    assert 1e3 < best <= mean <= worst < 1e11  # ns


@pytest.mark.slow
def test_failure_is_exit_112_with_the_reason(tmp_path):
    code, result, _, _, _ = kernelbot(tmp_path, "test", ZOO / "zeros.py")
    assert code == 112 and result["check"] == "fail"
    assert result["test.0.status"] == "fail" and "output differs" in result["test.0.error"]


@pytest.mark.slow
def test_submission_cannot_write_to_the_pipe_or_see_the_seed(tmp_path):
    code, result, lines, output, work = kernelbot(tmp_path, "test", ZOO / "writes_fds.py")
    assert code == 112 and result["check"] == "fail"
    assert lines.count("check: fail") == 1 and "check: pass" not in lines  # only our lines
    code, result, _, _, work = kernelbot(tmp_path, "test", ZOO / "probes_env.py", seed="13572468")
    assert code == 0
    log = log_of(work / "results" / "logs", "submission")
    assert "POPCORN" not in log and "13572468" not in log


@pytest.mark.slow
def test_a_reason_cannot_add_lines_or_escapes_to_the_pipe(tmp_path):
    code, result, lines, output, _ = kernelbot(tmp_path, "test", ROOT / "tests" / "zoo_os" / "replies_bare_string.py")
    assert code == 112 and result["check"] == "fail" and lines[-1] == "check: fail"
    assert "check: pass" not in lines and not any(line.startswith("benchmark.") for line in lines)
    assert result["error"].startswith("protocol: unexpected message from the worker: 'x")
    assert not any("\x1b" in line for line in lines) and "\x1b" not in output


@pytest.mark.slow
def test_bad_testfile_is_exit_113(tmp_path):
    code, _, _, output, _ = kernelbot(tmp_path, "test", ZOO / "zeros.py", cases="batchsize 4; seed: 1\n")
    assert code == 113 and "expected 'key: value; key: value'" in output
    code, _, _, output, _ = kernelbot(tmp_path, "test", ZOO / "zeros.py", cases="batchsize: 4; seed: 1\n")
    assert code == 113 and "qseqlen: missing" in output
    code, _, _, output, _ = kernelbot(tmp_path, "test", ZOO / "zeros.py",
                                      cases="batchsize: 4; qseqlen: 1; kvseqlen: 0; seed: 1\n")
    assert code == 113 and "kvseqlen must be a whole number of at least 1, got 0" in output
    code, _, _, output, _ = kernelbot(tmp_path, "test", ZOO / "zeros.py",
                                      cases=f"batchsize: 4; qseqlen: 1; kvseqlen: 8; seed: {2**63}\n")
    assert code == 113 and "seed must be a whole number from 0 to 2**63 - 1" in output


def test_a_test_file_that_is_a_pipe_is_exit_113(tmp_path):
    """Red-team pass 14: the parent read the TESTFILE whole, as the submission before it: a named
    pipe blocked it for good, /dev/zero filled its memory."""
    fifo = tmp_path / "cases.txt"
    os.mkfifo(fifo)
    env = {**os.environ, "POPCORN_FD": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "eval.py"), "test", str(fifo)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 113 and "the test file is not a regular file" in proc.stdout + proc.stderr


def test_no_pipe_is_exit_111(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("POPCORN")}
    proc = subprocess.run([sys.executable, str(ROOT / "eval.py"), "test", "tests.txt"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 111 and "POPCORN_FD is not set" in proc.stderr


def test_parse_testfile(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("a: 1; b: true; c: word; d: 1,2,3\n\n")
    assert parse_testfile(path) == [{"a": 1, "b": True, "c": "word", "d": [1, 2, 3]}]
    path.write_text("a: 1.5\n")
    with pytest.raises(BadTestFile, match="bad value for a"):
        parse_testfile(path)


@pytest.mark.slow
def test_a_file_the_parser_cannot_take_fails_in_the_protocol(tmp_path):
    code, result, _, out, _ = kernelbot(tmp_path, "test", ZOO / "nests_expression.py")
    assert code == 112 and result["check"] == "fail", out[-2000:]
    assert "Traceback" not in out
