"""The OS-level zoo (tests/zoo_os): each attack runs through the real engine inside the sandbox
and must be rejected or have no effect (files, database, processes, the parent's output and memory).

These need bubblewrap's namespaces. Where they cannot be made, the tests skip with the reason,
except in CI (CI=true), where that is a failure: CI must exercise the sandboxed path."""

import dataclasses
import hashlib
import os
import resource
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import ROOT, cli, processes_with

from harness.config import RunContext

from harness.parent.engine import evaluate
from harness.config import RunConfig
from harness.parent.launch import sandbox_problem
from harness.report.store import Store

ZOO_OS = Path(__file__).resolve().parent / "zoo_os"
WHY = sandbox_problem()
if WHY is not None and os.environ.get("CI"):
    raise RuntimeError(f"CI must run the sandboxed path, but: {WHY}")
pytestmark = [pytest.mark.skipif(WHY is not None, reason=f"no OS sandbox here: {WHY}"),
              pytest.mark.slow]  # one sandboxed worker per attack: end to end


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): digest(p) for p in sorted(folder.rglob("*.py")) if "__pycache__" not in p.parts}


@pytest.fixture
def arena(tmp_path):
    """A submissions folder holding the attack and a competitor's file, a results database with an
    earlier run in it, and a log folder."""
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(ROOT / "submissions" / "torch_batched.py", subs / "competitor.py")
    db_path = tmp_path / "results" / "runs.db"
    store = Store(db_path)
    store.save_bandwidth("NVIDIA H200", 4.2e12)
    store.close()
    return subs, db_path, tmp_path / "logs"


def attack(problem, cpu, arena, name, mode="test", **timeouts):
    subs, db_path, logs = arena
    path = subs / name
    shutil.copy(ZOO_OS / name, path)
    if timeouts:
        problem = dataclasses.replace(problem, spec=dataclasses.replace(
            problem.spec, timeouts=dataclasses.replace(problem.spec.timeouts, **timeouts)))
    ctx = RunContext(problem, cpu, RunConfig(small=True, logs=str(logs), sandbox="require", private=(db_path, logs)))
    result = evaluate(path, ctx, mode)
    assert result.sandboxed
    return result, Path(result.log).read_text()


def first_failure(result):
    return result.error or next((c.reason for c in result.cases if not c.ok), "")


def test_rewriting_the_parents_files_has_no_effect(problem, cpu, arena):
    before = tree_digest(ROOT / "harness") | {"reference.py": digest(ROOT / "reference.py")}
    result, log = attack(problem, cpu, arena, "rewrites_reference.py")
    assert not result.ok and "output differs from the reference" in first_failure(result)
    assert "could not write" in log and not [line for line in log.splitlines() if line.startswith("rewrote ")]
    assert tree_digest(ROOT / "harness") | {"reference.py": digest(ROOT / "reference.py")} == before


def test_planted_modules_do_not_land(problem, cpu, arena):
    places = [ROOT, arena[0], *map(Path, sys.path[:8])]
    targets = [folder / name for folder in places for name in ("kernelguard.py", "sitecustomize.py")]
    before = {t: digest(t) if t.is_file() else None for t in targets}  # site-packages holds the real kernelguard.py
    result, log = attack(problem, cpu, arena, "plants_module.py")
    assert not result.ok and "output differs from the reference" in first_failure(result)
    # only its private scratch (the working folder, removed after it) takes a file
    assert not [line for line in log.splitlines() if line.startswith("planted ") and "/tmp/work/" not in line]
    assert {t: digest(t) if t.is_file() else None for t in targets} == before


def test_competitors_files_are_invisible_and_unchanged(problem, cpu, arena):
    before = digest(arena[0] / "competitor.py")
    result, log = attack(problem, cpu, arena, "overwrites_neighbours.py")
    assert result.ok, first_failure(result)
    assert "NEIGHBOURS: []" in log
    assert digest(arena[0] / "competitor.py") == before


def test_database_is_out_of_reach(problem, cpu, arena):
    db_path = arena[1]
    before = digest(db_path)
    result, log = attack(problem, cpu, arena, "rewrites_database.py")
    assert not result.ok
    assert not [line for line in log.splitlines() if line.startswith("rewrote ")]
    assert digest(db_path) == before
    assert Store(db_path).bandwidth("NVIDIA H200") == 4.2e12


def test_parent_is_out_of_sight(problem, cpu, arena, capfd):
    result, log = attack(problem, cpu, arena, "reads_parent.py")
    assert result.ok, first_failure(result)
    assert "OTHER PROCESSES: []" in log
    assert f"/proc/{os.getpid()}/" not in log
    out, err = capfd.readouterr()
    assert "check: pass" not in out + err


def test_killing_the_parent_costs_only_the_worker(problem, cpu, arena):
    result, _ = attack(problem, cpu, arena, "kills_parent.py")
    assert not result.ok and "crashed" in first_failure(result)
    # this test process (the parent) is still here, and so the run goes on:
    again, _ = attack(problem, cpu, arena, "overwrites_neighbours.py")
    assert again.ok


def test_no_daemon_outlives_the_run(problem, cpu, arena):
    result, _ = attack(problem, cpu, arena, "leaves_daemon.py")
    assert result.ok, first_failure(result)
    deadline = time.monotonic() + 5
    while processes_with("4321.5") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with("4321.5") == []


def test_a_stalled_reply_times_out(problem, cpu, arena):
    start = time.monotonic()
    result, _ = attack(problem, cpu, arena, "stalls_reply.py", test_case=3)
    assert first_failure(result).startswith("timeout: timed out after 3 s")
    assert time.monotonic() - start < 60


def test_a_huge_reply_allocates_nothing(problem, cpu, arena):
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result, _ = attack(problem, cpu, arena, "huge_reply.py")
    assert "protocol: malformed message" in first_failure(result)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    assert grown_mib < 256


def test_forged_timings_have_no_effect_on_the_cpu(problem, cpu, arena):
    result, _ = attack(problem, cpu, arena, "forges_timing.py", mode="benchmark")
    assert result.ok, first_failure(result)
    timed = [c for c in result.cases if c.device]
    assert timed and all(c.device.min >= 0.03 for c in timed)


def test_no_network(problem, cpu, arena, monkeypatch):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    monkeypatch.setenv("MLA_EVAL_TEST_PORT", str(listener.getsockname()[1]))
    result, log = attack(problem, cpu, arena, "reaches_network.py")
    assert result.ok, first_failure(result)
    assert "no connection" in log
    with pytest.raises(socket.timeout):
        listener.accept()


def test_files_written_stay_in_the_scratch(problem, cpu, arena, own_tmp):
    places = [Path("/tmp"), Path("/dev/shm"), Path("/root/.triton/cache"), Path.home() / ".triton" / "cache",
              Path("/var/tmp"), Path.cwd()]
    result, log = attack(problem, cpu, arena, "escapes_scratch.py")
    assert result.ok, first_failure(result)
    assert not [p for p in places if (p / "mla-eval-escaped.txt").exists()]
    assert not list(own_tmp.iterdir()), "a scratch folder was left"


def test_a_flooded_log_stays_bounded(problem, cpu, arena):
    from harness.parent.launch import LOG_LIMIT

    result, _ = attack(problem, cpu, arena, "floods_log.py", test_case=60)
    assert not result.ok and "Broken pipe" in first_failure(result), first_failure(result)
    log = Path(result.log)
    assert LOG_LIMIT < log.stat().st_size <= LOG_LIMIT + 200 and log.read_bytes().rstrip().endswith(b"output]")


def test_reserving_disk_blocks_through_its_log_reserves_nothing(problem, cpu, arena):
    result, text = attack(problem, cpu, arena, "reserves_log_space.py")  # (before: 512 MiB held by a 60-byte log)
    assert result.ok, first_failure(result)
    assert "fallocate on 1: -1" in text and "fallocate on 2: -1" in text
    log = Path(result.log).stat()
    assert log.st_blocks * 512 <= max(log.st_size, 1 << 16)


def test_replies_sent_before_the_question_are_refused(problem, cpu, arena):
    result, _ = attack(problem, cpu, arena, "replies_early.py")
    assert not result.ok
    assert any(reason in first_failure(result) for reason in
               ("protocol: the worker sent a message nobody asked for", "output differs from the reference"))


def test_a_deeply_nested_reply_is_a_protocol_failure(problem, cpu, arena):
    result, _ = attack(problem, cpu, arena, "nests_json.py")
    assert not result.ok and "protocol: malformed message" in first_failure(result)


def test_markup_in_a_reason_is_shown_as_text(problem, cpu, arena):
    from rich.console import Console

    from harness import report

    result, _ = attack(problem, cpu, arena, "marks_up_reason.py")
    assert not result.ok and "\x1b" not in first_failure(result)
    console = Console(width=200, record=True, color_system=None)
    console.print(report.submission_table(result, problem.label))
    text = console.export_text()
    assert "[green]pass[/]" in text  # printed literally, not rendered as a green "pass"


def test_runs_record_the_fence_and_a_dead_run_is_marked(tmp_path, cpu):
    store = Store(tmp_path / "r.db")
    run = store.start_run("test", "t", cpu, {}, sandboxed=True)
    store.db.execute("UPDATE runs SET pid = 999999999 WHERE id = ?", (run,))  # a process that does not exist
    store.db.commit()
    stopped = store.start_run("test", "t", cpu, {}, sandboxed=False)
    store.end_run(stopped, "interrupted")
    store.close()
    rows = {r["id"]: r for r in Store(tmp_path / "r.db").runs()}
    assert (rows[run]["status"], rows[run]["sandboxed"]) == ("died", 1)
    assert (rows[stopped]["status"], rows[stopped]["sandboxed"]) == ("interrupted", 0)


def test_exports_say_whether_a_result_was_sandboxed(problem, cpu, arena, tmp_path):
    import json

    from harness import report

    result, _ = attack(problem, cpu, arena, "overwrites_neighbours.py")
    out = tmp_path / "x.json"
    report.write_exports([result], problem.label, None, {"sandboxed": True}, json_path=str(out))
    exported = json.loads(out.read_text())
    assert exported["run"]["sandboxed"] is True
    assert exported["rows"] and all(row["sandboxed"] is True and row["audit"].startswith("unverified")
                                    for row in exported["rows"])


def test_a_submission_directly_in_tmp_runs(problem, cpu, tmp_path):
    """Its folder (hidden, then read-only) is /tmp itself, where the sandbox also mounts its scratch."""
    path = Path(tempfile.gettempdir()) / f"mla-eval-test-{os.getpid()}.py"
    shutil.copy(ROOT / "submissions" / "torch_batched.py", path)
    try:
        ctx = RunContext(problem, cpu, RunConfig(small=True, logs=str(tmp_path / "logs"), sandbox="require"))
        result = evaluate(path, ctx, "test")
    finally:
        path.unlink()
    assert result.sandboxed and result.ok, first_failure(result)


def test_shrinking_the_shared_memory_cannot_crash_the_parent(problem, cpu, arena):
    result, log = attack(problem, cpu, arena, "truncates_inputs.py")
    assert result.ok, first_failure(result)
    assert "could not truncate" in log and "\ntruncated" not in log


def test_a_fresh_runs_database_and_logs_are_hidden_from_the_first_worker(tmp_path):
    """Through the CLI, whose first worker starts before the run opens its database. The paths sit
    outside /tmp (which the sandbox replaces anyway), as the defaults results/ do."""
    base = Path(tempfile.mkdtemp(prefix="mla-eval-fresh-", dir=ROOT / "tests"))
    try:
        db, logs = base / "fresh" / "r.db", base / "fresh" / "logs"
        code = cli(tmp_path, "--mode", "test", "--sandbox", "require", "--db", str(db), "--logs", str(logs),
                   "--submission", str(ZOO_OS / "lists_mounts.py"))
        assert code == 0
        (log,) = logs.glob("lists_mounts.*.log")
        mounts = [line.split()[1] for line in log.read_text().splitlines() if line.startswith("MOUNT ")]
        # nothing mounted at or inside the run's folder (a folder above it may hold the harness's own
        # files where the checkout lies under /tmp: tests/test_allowlist.py shows that it holds no more)
        assert mounts and not [m for m in mounts if m != "/" and Path(m).is_relative_to(base)], mounts
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_an_infinite_number_in_a_reply_is_a_protocol_failure(problem, cpu, arena):
    result, _ = attack(problem, cpu, arena, "infinite_shape.py")
    assert not result.ok and "protocol: malformed message" in first_failure(result)


def test_a_scratch_tree_too_deep_for_rmtree_is_removed(problem, cpu, arena, own_tmp):
    result, _ = attack(problem, cpu, arena, "deep_scratch.py")
    assert result.ok, first_failure(result)
    assert not list(own_tmp.iterdir())


def test_filling_its_folders_stops_at_the_tmpfs_size_and_leaves_nothing(problem, cpu, arena, own_tmp, monkeypatch):
    from harness.parent import launch

    monkeypatch.setattr(launch, "TMPFS_LIMIT", 64 << 20)  # (quicker to fill than the real 1 GiB)
    result, log = attack(problem, cpu, arena, "fills_disk.py")  # (before: /tmp/work, a host folder, took the full 512 MiB)
    assert result.ok, first_failure(result)
    filled = {line.split()[1]: (int(line.split()[2]), line) for line in log.splitlines() if line.startswith("filled ")}
    assert set(filled) == {"/tmp/work", "/tmp", "/dev/shm"}, log[-2000:]
    for written, line in filled.values():
        assert 0 < written <= 64 << 20 and "No space left on device" in line, line
    assert not list(own_tmp.iterdir())


def test_no_user_namespace_can_be_made_inside_the_sandbox(problem, cpu, arena):
    result, log = attack(problem, cpu, arena, "mounts_own_tmpfs.py")  # (before: "made")
    assert result.ok, first_failure(result)
    assert "nested user namespace: No space left on device" in log, log[-500:]


def test_the_keyrings_are_out_of_reach(problem, cpu, arena):
    """The operator's keys are not the submission's to read, and keys it added would outlive it (before
    the seccomp filter: every call below "done", the planted key in /proc/keys after the run)."""
    result, log = attack(problem, cpu, arena, "uses_keyring.py")
    assert result.ok, first_failure(result)
    assert "/proc/keys: Permission denied" in log or "/proc/keys lines: 0" in log, log[-500:]
    calls = [line for line in log.splitlines() if line.startswith(("join:", "add_key", "link", "read"))]
    assert len(calls) >= 2 and all(line.endswith("Operation not permitted") for line in calls), calls
    assert "mla-eval-planted" not in Path("/proc/keys").read_text()


def test_no_file_is_left_when_the_sandbox_is_killed_while_its_processes_write(problem, cpu, arena, own_tmp):
    result, _ = attack(problem, cpu, arena, "races_scratch_removal.py")  # (it left files in 3 of 3 tries before the fix)
    assert not result.ok and "protocol" in first_failure(result), first_failure(result)
    assert not list(own_tmp.iterdir())


def test_the_parents_environment_stays_with_the_parent(problem, cpu, arena, monkeypatch):
    monkeypatch.setenv("MLA_EVAL_PLANTED_TOKEN", "hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter3")
    result, _ = attack(problem, cpu, arena, "reads_environment.py")
    assert "secrets: []" in first_failure(result)


def test_a_forged_failure_kind_is_a_protocol_failure_and_no_export_cell_is_a_formula(problem, cpu, arena, tmp_path):
    import csv

    from harness import report

    result, _ = attack(problem, cpu, arena, "forges_failure_kind.py")
    assert not result.ok and first_failure(result).startswith("protocol: unexpected message from the worker")
    out = tmp_path / "x.csv"
    report.write_exports([result], problem.label, None, {}, csv_path=str(out))
    with open(out, newline="") as f:
        cells = [cell for row in csv.reader(f) for cell in row]
    assert any("HYPERLINK" in cell for cell in cells)  # the forged text is there, shown...
    assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@"))]  # ...never as a formula


def test_markup_in_a_reason_stays_text_in_the_markdown_export_and_the_terminal(problem, cpu, arena, tmp_path, capsys):
    from harness import report

    result, _ = attack(problem, cpu, arena, "marks_up_export.py")
    assert not result.ok and "exception: ValueError" in first_failure(result)
    out = tmp_path / "x.md"
    report.write_exports([result], problem.label, None, {}, markdown_path=str(out))
    text = out.read_text()
    # the reason is a code span: shown as typed, never rendered as HTML or a link
    assert ("| ` exception: ValueError: <img src=x onerror=alert(document.domain)> [PASS](javascript:alert(1)) "
            ":white_check_mark: :white_check_mark: (marks_up_export.py:9) ` |") in text
    capsys.readouterr()
    report.console.print(report.submission_table(result, problem.label))  # the harness's own console
    shown = capsys.readouterr().out
    assert ":white_check_mark:" in shown and "\u2705" not in shown


def test_a_scanner_stall_is_cut_short_and_the_run_goes_on(problem, cpu, arena, monkeypatch):
    from harness.parent import scan

    monkeypatch.setattr(scan, "SCAN_SECONDS", 1.0)
    result, _ = attack(problem, cpu, arena, "stalls_scanner.py")
    assert result.ok, first_failure(result)
    assert result.scan.classification == "not scanned (kernelguard ran over 1 s)"
    assert result.phases["static scan"] < 4


def test_a_worker_that_answers_without_reading_is_stopped(problem, cpu, arena):
    result, _ = attack(problem, cpu, arena, "fills_send_buffer.py", mode="benchmark")
    assert first_failure(result).startswith("protocol: the worker answered without reading its requests"), \
        first_failure(result)


def test_a_worker_that_stops_reading_cannot_hang_a_send(problem, cpu, arena, monkeypatch):
    """Where the kernel cannot tell what the worker left unread, the same attack fills the parent's
    socket buffer after a few hundred requests (a GPU benchmark's worth); the small CPU cases send
    ~60, so here the parent's end gets the smallest buffer, and the send's deadline ends it."""
    import harness.parent.launch
    import harness.parent.sandbox
    from harness.worker.channel import Channel, pair

    def small_pair():
        parent_end, child_end = pair()
        parent_end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        return parent_end, child_end

    monkeypatch.setattr(harness.parent.launch, "pair", small_pair)
    monkeypatch.setattr(Channel, "unread", lambda self: 0)
    monkeypatch.setattr(harness.parent.sandbox, "SEND_SECONDS", 2.0)
    start = time.monotonic()
    result, _ = attack(problem, cpu, arena, "fills_send_buffer.py", mode="benchmark")
    assert first_failure(result).startswith("timeout: the worker did not take its request within 2.0 s"), first_failure(result)
    assert time.monotonic() - start < 120


def test_a_send_has_a_deadline():
    """The channel itself: a peer that reads nothing makes a send with a deadline fail at it (a
    plain send would block forever once the buffer is full)."""
    from harness.worker.channel import Channel, ChannelTimeout, pair

    parent_end, child_end = pair()
    try:
        channel = Channel(parent_end, 1 << 20)
        start = time.monotonic()
        with pytest.raises(ChannelTimeout):
            for _ in range(100_000):
                channel.send({"op": "call", "timed": True, "mark": "x" * 100}, deadline=time.monotonic() + 0.5)
        assert time.monotonic() - start < 10
    finally:
        parent_end.close()
        child_end.close()


def test_an_unhashable_failure_kind_fails_that_file_only(problem, cpu, arena):
    result, _ = attack(problem, cpu, arena, "unhashable_kind.py", test_case=5)
    assert first_failure(result).startswith("protocol: unexpected message from the worker"), first_failure(result)


def test_a_failed_send_of_the_inputs_holds_no_descriptors(problem, cpu, arena):
    open_fds = lambda: len(os.listdir("/proc/self/fd"))  # noqa: E731
    attack(problem, cpu, arena, "exits_before_inputs.py")  # (the first run opens what every run shares)
    before = open_fds()
    for _ in range(3):
        result, _ = attack(problem, cpu, arena, "exits_before_inputs.py")
        assert first_failure(result).startswith("crashed:"), first_failure(result)
    assert open_fds() <= before


def test_other_databases_beside_the_runs_are_hidden(tmp_path):
    """A submission of one run could read, or read-lock, the database of another run going on at the
    same time (red-team pass 11: that run died with 'database is locked'); the databases' usual
    folder is hidden with the run's own. (Outside /tmp, which the sandbox replaces anyway.)"""
    import subprocess

    from harness.parent.launch import bwrap_command, find_bwrap
    from harness.cli.flags import private_paths

    (ROOT / "results").mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="test-hidden-", dir=ROOT / "results"))
    try:
        (folder / "runs.db").touch()
        (folder / "other.db").write_bytes(b"SQLite format 3\0")
        private = private_paths(str(folder / "runs.db"), str(tmp_path / "logs"))
        box = bwrap_command(find_bwrap(), ROOT / "submissions" / "torch_batched.py", private)
        try:
            run = subprocess.run(box + [sys.executable, "-c", f"open({str(folder / 'other.db')!r}, 'rb')"],
                                 pass_fds=box.fds, capture_output=True, text=True, timeout=60)
        finally:
            box.close()
        assert run.returncode != 0 and "No such file" in run.stderr, run.stderr[-300:]
    finally:
        shutil.rmtree(folder)


def test_a_worker_starts_on_a_session_keyring_of_its_own():
    """Outside the seccomp filter's reach (a kernel service that takes a key by its serial, AF_ALG's):
    the child does not possess the operator's keys, its session keyring is a fresh one."""
    import platform
    import subprocess

    from harness.parent.launch import KEYCTL, _limits

    if platform.machine() not in KEYCTL:
        pytest.skip("no keyctl number known for this machine")
    ask = ("import ctypes, platform; from harness.parent.launch import KEYCTL; "
           "print(ctypes.CDLL(None).syscall(KEYCTL[platform.machine()], 0, ctypes.c_long(-3), 1))")
    parent = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True, cwd=ROOT).stdout
    child = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True, cwd=ROOT, preexec_fn=_limits).stdout
    assert parent.strip() and child.strip() and parent != child, (parent, child)


# -- Least privilege for reads (issue 38): what a worker can read it can lock, or send out through its
# reason, its log and its timings. Another run's database and a .env are planted where the sandbox
# showed them before its allow-list (the checkout, outside the run's own private folder).

@pytest.fixture
def other_run(cpu):
    """Another run's database in the checkout's results/ (a finished run: its secret seed stored, a
    task named with a token), and a .env with the token at the checkout's root and in $HOME. Yields
    (that database, the token, the secret)."""
    token, secret = f"TOKEN{os.urandom(6).hex()}", 7_000_000_000_000 + os.getpid()
    (ROOT / "results").mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="test-other-run-", dir=ROOT / "results"))
    planted = [ROOT / f".env.canary-{os.getpid()}", Path.home() / f".mla-eval-canary-{os.getpid()}"]
    try:
        store = Store(folder / "other.db")
        run = store.start_run("test", f"task-{token}", cpu, {})
        store.finish_run(run, secret=secret)
        store.close()
        for path in planted:
            path.write_text(f"API_TOKEN={token}\n")
        yield folder / "other.db", token, secret
    finally:
        for path in planted:
            path.unlink(missing_ok=True)
        shutil.rmtree(folder, ignore_errors=True)


def exports(result, problem, tmp_path) -> str:
    """Everything the run's exports say of `result`: JSON, CSV and Markdown."""
    from harness import report

    paths = {"json_path": tmp_path / "x.json", "csv_path": tmp_path / "x.csv", "markdown_path": tmp_path / "x.md"}
    report.write_exports([result], problem.label, None, {}, **{k: str(v) for k, v in paths.items()})
    return "".join(p.read_text() for p in paths.values())


def test_holding_locks_on_databases_blocks_no_other_run(other_run, tmp_path):
    """The attack holds SQLite's shared lock on every database it can open for as long as it runs
    (before the allow-list: an honest run on the checkout's default database, started meanwhile,
    ended with "database is locked (nothing was run)"); honest runs started meanwhile, on the
    attacker's own database and on another run's in the checkout, end as they would alone."""
    import subprocess

    from harness.cli import main

    other_db, _, _ = other_run
    own = Path(tempfile.mkdtemp(prefix="test-attacker-", dir=ROOT / "results"))
    logs = tmp_path / "attacker-logs"
    env = {**os.environ, "SUBMISSION_HOLD_SECONDS": "30"}  # (it is stopped once the honest runs are over)
    attacker = subprocess.Popen([sys.executable, str(ROOT / "eval.py"), "--mode", "test", "--no-progress", "--device",
                                 "cpu", "--sandbox", "require", "--db", str(own / "a.db"), "--logs", str(logs),
                                 "--submission", str(ZOO_OS / "locks_databases.py")], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any("locked:" in p.read_text() for p in logs.glob("locks_databases.*.log")):
            assert attacker.poll() is None and time.monotonic() < deadline, "the attack never took its locks"
            time.sleep(0.2)
        honest = ROOT / "submissions" / "torch_batched.py"
        for db in (other_db, own / "a.db"):  # another run's database, then the attacker's own
            code = main(["--no-progress", "--device", "cpu", "--sandbox", "require", "--mode", "test", "--db", str(db),
                         "--logs", str(tmp_path / "logs"), "--submission", str(honest)])
            assert code == 0, f"an honest run on {db} was blocked"
        assert attacker.poll() is None, "the honest runs did not overlap the attack (raise its hold)"
        (log,) = logs.glob("locks_databases.*.log")
        assert "locked: []" in log.read_text()
    finally:
        if attacker.poll() is None:
            attacker.kill()
            attacker.wait()
        shutil.rmtree(own, ignore_errors=True)


def test_other_runs_secrets_are_out_of_reach(problem, cpu, arena, other_run, tmp_path):
    _, token, secret = other_run
    result, log = attack(problem, cpu, arena, "reads_other_runs.py")
    assert not result.ok and "found: []" in first_failure(result), first_failure(result)
    for text in (first_failure(result), log, exports(result, problem, tmp_path)):
        assert token not in text and str(secret) not in text and "other.db" not in text


def test_a_planted_dotenv_is_not_exfiltrated(problem, cpu, arena, other_run, tmp_path):
    """Through the engine's reason and exports, and through kernelbot's popcorn pipe (a .env beside
    the submission.py of its folder too)."""
    from test_popcorn import kernelbot

    _, token, _ = other_run
    secrets = (token, token.encode().hex())
    result, log = attack(problem, cpu, arena, "exfiltrates_dotenv.py")
    assert not result.ok and "nothing to send" in first_failure(result), first_failure(result)
    for text in (first_failure(result), log, exports(result, problem, tmp_path)):
        assert not any(s in text for s in secrets)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".env").write_text(f"API_TOKEN={token}\n")
    code, popcorn, lines, output, _ = kernelbot(tmp_path, "test", ZOO_OS / "exfiltrates_dotenv.py")
    assert code == 112 and "nothing to send" in popcorn["test.0.error"], lines
    assert not any(s in "\n".join(lines) + output for s in secrets)


def test_timings_carry_nothing_secret(problem, cpu, arena, other_run):
    """The channel stays (a submission shapes its own timings); what it can read for it is nothing."""
    result, log = attack(problem, cpu, arena, "encodes_in_timings.py")
    assert result.ok, first_failure(result)
    assert "read 0 bytes" in log, log[-500:]
