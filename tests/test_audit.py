"""The profiler audit (harness/parent/audit.py): its strict reading of Nsight Compute's CSV (`--csv --page
raw --nvtx`, header and cells as the H200's ncu writes them, BENCHMARKS.md), the attribution of
kernels to calls, the judgement, and the plumbing of the profiled worker (its report through a
pipe, its own output in its log) on the CPU with a stand-in profiler. The audit itself runs on
the GPU (lab/h200_sandbox.sh)."""

import shutil

import pytest
import torch
from conftest import ROOT

from harness.parent.audit import AUDIT_CALLS, MARK, TOLERANCE, ReportError, _judge, kernel_times, per_case

HEADER = ('"ID","Process ID","Process Name","Host Name","thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:'
          'Color:Msg_Type:Msg","Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",'
          '"Kernel Name","Context","gpu__time_duration.sum"')
UNITS = '"","","","","","","","","ns"'


def row(i: int, kernel: str, ns: str, range_name: str = "") -> str:
    stack = f'2  ""<default domain>:{range_name}:none:none:none:none:none:none"" ' if range_name else ""
    return f'"{i}","2","python3.12","127.0.0.1","{stack}","","{kernel}","1","{ns}"'


def report(*kernels: tuple) -> str:
    """A report of `kernels` ((name, ns) or (name, ns, NVTX range)), numbered in order."""
    rows = [row(i, *k) for i, k in enumerate(kernels)]
    return "\n".join(["==WARNING== Note: Running with unmodified GPU clocks.",
                      "==PROF== Connected to process 2 (/usr/bin/python3.12)", HEADER, UNITS, *rows])


def test_kernels_are_read_with_their_ranges_and_durations():
    assert kernel_times(report(("fill", "39,520"), ("_mla_decode_kernel", "10,944", f"{MARK}/3/0"))) == [
        ("fill", "", 39.52e-6),
        ("_mla_decode_kernel", f'2  "<default domain>:{MARK}/3/0:none:none:none:none:none:none" ', 10.944e-6)]
    assert kernel_times(report()) == [] and kernel_times("==PROF== Disconnected") == []


@pytest.mark.parametrize("text, why", [
    (report(("a", "1")) + "\n==ERROR== The application returned an error", "reported an error"),
    (report(("a", "1")) + "\n" + HEADER, "not its kernel 1"),                       # a second header
    (report(("a", "1")).replace(HEADER, row(0, "fake", "1")), "start with its header"),
    (report(("a", "1"), ("b", "2")).replace('"1","2","py', '"0","2","py'), "not its kernel 1"),  # an ID twice
    (report(("a", "1")) + "\n" + row(5, "b", "1"), "not its kernel 1"),            # an ID skipped
    (report(("a", "1")) + '\n"1","3","x"', "not its kernel 1"),                    # a short line
    (report(("a", "1")) + "\nplain text", "not its kernel 1"),
    (report(("a", "nan")), "has a duration of nan"), (report(("a", "-5")), "has a duration of -5"),
    (report(("a", "inf")), "has a duration of inf"), (report(("a", "fast")), "has no duration"),
    (report(("a", "1")) + '\n"2,"3"', "unreadable"),                                # an open quote
])
def test_a_report_the_profiler_did_not_write_is_refused(text, why):
    with pytest.raises(ReportError, match=why):
        kernel_times(text)


def test_calls_are_summed_per_case_warmup_and_import_excluded():
    assert AUDIT_CALLS == 3
    totals, calls = per_case(kernel_times(report(
        ("import-time fill", "40,000"),                                   # before any call: not counted
        ("compile-time autotune", "900,000", f"{MARK}/warmup/0"),
        ("decode", "8,000", f"{MARK}/0/0"), ("combine", "5,000", f"{MARK}/0/0"),
        ("decode", "8,000", f"{MARK}/0/1"), ("combine", "5,000", f"{MARK}/0/1"),
        ("between calls", "1,000"),                                       # after an audited call: counts for case 0
        ("decode", "8,000", f"{MARK}/0/2"),
        ("autotune", "500,000", f"{MARK}/warmup/12"),
        ("precomputed between warm-up and call", "70,000"),               # counts for case 12
        ("decode", "100,000", f"{MARK}/12/0"), ("decode", "100,000", f"{MARK}/12/2"))))
    assert set(totals) == {0, 12} and calls == {0: {0, 1, 2}, 12: {0, 2}}
    assert abs(totals[0] - 35e-6) < 1e-12 and abs(totals[12] - 270e-6) < 1e-12


def test_judge_rejects_medians_below_the_profiler_and_calls_it_did_not_see(problem):
    from harness.results import CaseResult, SubmissionResult
    from harness.timing import summarize

    cases = {c.index: c for c in problem.spec.cases("benchmark", small=False)}
    assert len(cases) >= 4
    per_call = 100e-6
    medians = {0: per_call * 0.98, 1: per_call * (1 - TOLERANCE) * 0.9, 2: per_call, 3: per_call}
    result = SubmissionResult("x.py", "0")
    result.cases = [CaseResult("benchmark", i, cases[i].name, True, "", device=summarize([m] * 3), args=cases[i].args)
                    for i, m in medians.items()]
    every = set(range(AUDIT_CALLS))
    _judge(result, cases, {i: per_call * AUDIT_CALLS for i in (0, 1, 3)}, {0: every, 1: every, 3: every - {1}})
    honest, forged, unseen, partly = result.cases
    assert honest.ok and abs(honest.audit_s - per_call) < 1e-12
    assert not forged.ok and "below the profiler's 100.0 µs" in forged.reason
    assert not unseen.ok and "GPU kernels in 0 of this case's 3 audit calls" in unseen.reason
    assert not partly.ok and "in 2 of this case's 3" in partly.reason
    assert not result.ok and result.audit == "audit failed: no kernels seen in 2 case(s)"


# A stand-in for the profiler: runs the program, then writes a report line to its standard output.
STAND_IN = ["/bin/sh", "-c", '"$@"; code=$?; echo "==PROF== stand-in report"; exit $code', "stand-in"]


def test_the_profiled_workers_own_output_stays_out_of_the_report(cpu, tmp_path, problem):
    from harness.parent.sandbox import Sandbox

    path = tmp_path / "prints_results.py"
    shutil.copy(ROOT / "tests" / "zoo" / "prints_results.py", path)  # prints "check: pass"
    box = Sandbox(path, cpu, tmp_path / "audit.log", 120, sandbox="auto", wrapper=STAND_IN,
                  report=tmp_path / "report.csv")
    try:
        box.wait_ready()
        data = problem.generate(problem.spec.cases("test", small=True)[0].args, 1, cpu.torch_device)
        box.share_inputs(data, *problem.layout(data))
        output, _ = box.call(False, 60)  # (no NVTX range: the CPU build of torch has none)
        assert isinstance(output, torch.Tensor)
    finally:
        box.close()
    assert box.worker.proc.returncode == 0
    assert box.worker.report.path.read_text() == "==PROF== stand-in report\n"
    assert "check: pass" in (tmp_path / "audit.log").read_text()


def test_the_profiler_may_write_a_large_report_but_the_worker_keeps_its_file_cap(cpu, tmp_path):
    """Nsight Compute keeps a temporary report in the sandbox's /tmp that grew past the worker's
    64 MiB file cap on the H200 (torch_batched.py: "Failed to save the report", audit failed): the
    profiler gets the tmpfs's size, and the worker takes LOG_LIMIT back before the submission loads."""
    from harness.parent.launch import LOG_LIMIT, TMPFS_LIMIT
    from harness.parent.sandbox import Sandbox, WorkerFailure

    big = LOG_LIMIT + (1 << 20)
    writer = ["/bin/sh", "-c", f'head -c {big} /dev/zero > /tmp/report.tmp && wc -c < /tmp/report.tmp && "$@"',
              "stand-in"]
    path = tmp_path / "reports_limit.py"
    path.write_text("import resource\nraise SystemExit(f'file cap {resource.getrlimit(resource.RLIMIT_FSIZE)}')\n")
    box = Sandbox(path, cpu, tmp_path / "audit.log", 120, sandbox="auto", wrapper=writer, report=tmp_path / "r.txt")
    try:
        with pytest.raises(WorkerFailure) as failed:
            box.wait_ready()
    finally:
        box.close()
    assert f"file cap ({LOG_LIMIT}, {LOG_LIMIT})" in str(failed.value)
    assert box.worker.report.path.read_text().strip() == str(big) and big < TMPFS_LIMIT


def test_modules_planted_in_a_scratch_folder_are_not_imported_by_a_worker_started_there(cpu, tmp_path, problem):
    """A worker runs its script by path, so its current folder (an unsandboxed worker's scratch,
    which a worker of the same submission may have written) is not on its import path: a planted
    `socket.py` (the first stdlib module the worker imports) or `resource.py` (the file cap's) is
    never loaded. (A sandboxed worker's folder is a fresh tmpfs of its own.)"""
    from harness.parent.sandbox import Sandbox

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for name in ("socket", "resource", "torch"):
        (scratch / f"{name}.py").write_text(f"raise SystemExit('planted {name} imported')\n")
    path = tmp_path / "honest.py"
    shutil.copy(ROOT / "submissions" / "torch_loop.py", path)
    box = Sandbox(path, cpu, tmp_path / "w.log", 120, sandbox="off", scratch=scratch, wrapper=STAND_IN,
                  report=tmp_path / "r.txt")
    try:
        box.wait_ready()
        data = problem.generate(problem.spec.cases("test", small=True)[0].args, 1, cpu.torch_device)
        box.share_inputs(data, *problem.layout(data))
        output, _ = box.call(False, 60)
        assert isinstance(output, torch.Tensor)
    finally:
        box.close()
    assert "planted" not in (tmp_path / "w.log").read_text()


def _worker_in(folder):
    """A stand-in for a worker whose working folder is `folder` (as an unsandboxed worker's is)."""
    import os
    import types

    return types.SimpleNamespace(open_work_folder=lambda: os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW))


def _read_in(worker, *parts: str) -> bytes:
    """A file of a running worker's working folder, read through open_work_folder."""
    import os

    fd = worker.open_work_folder()
    try:
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        file = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
        with os.fdopen(file, "rb") as f:
            return f.read()
    finally:
        os.close(fd)


def test_the_audit_worker_gets_the_timed_workers_kernels_from_sandbox_to_sandbox(cpu, tmp_path, problem, monkeypatch):
    """audit.start (here with a stand-in for the profiler, on the CPU) and a timed worker, both
    sandboxed: each works in a tmpfs of its own (nothing of it on the host: its scratch folder
    there stays empty and is removed when it closes); share_kernels copies the timed worker's
    Triton cache into the audit worker's, from sandbox to sandbox; the report lies beside the
    scratch folder, where the worker cannot write."""
    import harness.parent.audit as audit
    from harness.config import RunContext
    from harness.config import RunConfig
    from harness.parent.sandbox import Sandbox

    monkeypatch.setattr(audit, "why_not", lambda ctx: "")
    monkeypatch.setattr(audit, "find_ncu", lambda: "stand-in")
    monkeypatch.setattr(audit, "ncu_command", lambda exe: STAND_IN)
    path = tmp_path / "honest.py"
    path.write_text("import os\n"
                    "os.makedirs('/tmp/work/triton-cache/abc')\n"
                    "open('/tmp/work/triton-cache/abc/kernel.bin', 'wb').write(b'compiled')\n"
                    + (ROOT / "submissions" / "torch_loop.py").read_text())
    timed = Sandbox(path, cpu, tmp_path / "timed.log", 120, sandbox="require")
    config = RunConfig(small=True, logs=str(tmp_path / "logs"), sandbox="require")
    box = audit.start(path, RunContext(problem, cpu, config))
    try:
        timed.wait_ready()
        box.wait_ready()
        assert timed.worker.sandboxed and box.worker.sandboxed
        own = box.worker.scratch
        assert own.name.startswith("mla-eval-audit-") and list(own.iterdir()) == []
        assert list(timed.worker.scratch.iterdir()) == []  # (the kernel is in the timed worker's tmpfs)
        assert _read_in(timed.worker, "triton-cache", "abc", "kernel.bin") == b"compiled"
        audit.share_kernels(timed.worker, box)
        assert _read_in(box.worker, "triton-cache", "abc", "kernel.bin") == b"compiled"
        assert list(own.iterdir()) == []
        assert box.worker.report.path.parent == own.parent and not box.worker.report.path.is_relative_to(own)
    finally:
        timed.close()
        box.close()
    assert not own.exists() and not timed.worker.scratch.exists()
    with pytest.raises(OSError):
        timed.worker.open_work_folder()  # (its tmpfs went with it)
    audit.discard_report(own)
    assert not box.worker.report.path.exists()


def test_sharing_kernels_follows_no_link_and_overwrites_nothing(tmp_path):
    """Both scratch folders are the submission's to write (the audit worker runs while the kernels
    are copied): a link planted on either side is not followed, a named pipe does not block the
    parent, nothing outside the audit worker's scratch changes, and past the limits the copy stops."""
    import os
    import types

    import harness.parent.audit as audit

    outside = tmp_path / "operator-secret.txt"
    outside.write_text("secret")
    victim = tmp_path / "operator-file.txt"
    victim.write_text("original")
    timed, own = tmp_path / "timed", tmp_path / "own"
    cache = timed / "triton-cache"
    (cache / "abc").mkdir(parents=True)
    (cache / "abc" / "kernel.bin").write_bytes(b"compiled")
    (cache / "abc" / "victim.json").write_bytes(b"attacker's bytes")
    (cache / "leak.txt").symlink_to(outside)               # would copy the operator's file in
    (cache / "linked-dir").symlink_to(tmp_path)            # would copy a whole folder of the host in
    os.mkfifo(cache / "pipe")                              # would block a plain copy
    (own / "triton-cache" / "abc").mkdir(parents=True)
    (own / "triton-cache" / "abc" / "victim.json").symlink_to(victim)  # would make the parent write there
    box = types.SimpleNamespace(worker=_worker_in(own))
    audit.share_kernels(_worker_in(timed), box)
    assert (own / "triton-cache" / "abc" / "kernel.bin").read_bytes() == b"compiled"
    assert victim.read_text() == "original" and (own / "triton-cache" / "abc" / "victim.json").is_symlink()
    assert not (own / "triton-cache" / "leak.txt").exists() and not (own / "triton-cache" / "linked-dir").exists()
    assert not (own / "triton-cache" / "pipe").exists()
    # a cache folder that is itself a link, on either side: nothing is copied
    other = tmp_path / "other"
    other.mkdir()
    (other / "triton-cache").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    audit.share_kernels(_worker_in(timed), types.SimpleNamespace(worker=_worker_in(other)))
    assert list((tmp_path / "elsewhere").iterdir()) == []
    linked = tmp_path / "linked-timed"
    linked.mkdir()
    (linked / "triton-cache").symlink_to(cache, target_is_directory=True)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    audit.share_kernels(_worker_in(linked), types.SimpleNamespace(worker=_worker_in(fresh)))
    assert not (fresh / "triton-cache" / "abc").exists()


def test_sharing_kernels_stops_at_its_limits(tmp_path, monkeypatch):
    import types

    import harness.parent.audit as audit

    timed = tmp_path / "timed" / "triton-cache"
    deep = timed.joinpath(*["d"] * 12)
    deep.mkdir(parents=True)
    (deep / "k.bin").write_bytes(b"x")
    for i in range(5):
        (timed / f"big{i}.bin").write_bytes(b"y" * 1000)
    own = tmp_path / "own"
    own.mkdir()
    monkeypatch.setattr(audit, "SHARE_BYTES", 2500)
    audit.share_kernels(_worker_in(tmp_path / "timed"), types.SimpleNamespace(worker=_worker_in(own)))
    copied = sum(p.stat().st_size for p in (own / "triton-cache").rglob("*.bin"))
    assert copied <= 2500 and not (own / "triton-cache").joinpath(*["d"] * 12, "k.bin").exists()


def test_sharing_kernels_counts_folders_and_stops_at_its_deadline(tmp_path, monkeypatch):
    """A cache of empty folders costs a tmpfs no bytes (a million of them held the parent 26 s and
    ~2 GB of kernel memory on the CPU machine): folders count as files do, and the copy has a deadline."""
    import types

    import harness.parent.audit as audit

    timed = tmp_path / "timed" / "triton-cache"
    for a in range(10):
        for b in range(10):
            (timed / str(a) / str(b)).mkdir(parents=True)
    own, later = tmp_path / "own", tmp_path / "later"
    own.mkdir()
    later.mkdir()
    monkeypatch.setattr(audit, "SHARE_FILES", 25)
    audit.share_kernels(_worker_in(tmp_path / "timed"), types.SimpleNamespace(worker=_worker_in(own)))
    assert 0 < sum(1 for _ in (own / "triton-cache").rglob("*")) <= 25
    monkeypatch.setattr(audit, "SHARE_FILES", 10_000)
    monkeypatch.setattr(audit, "SHARE_SECONDS", 0.0)
    audit.share_kernels(_worker_in(tmp_path / "timed"), types.SimpleNamespace(worker=_worker_in(later)))
    assert list((later / "triton-cache").iterdir()) == []
