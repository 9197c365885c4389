"""The trust boundary, one fast test per class, in the default `pytest`: what crosses from a worker
to the parent (the channel, shared memory, the timer's numbers, files) is bounded or ignored. The
end-to-end versions, each with a sandboxed worker running an attack file, are tests/test_sandbox.py
(slow set)."""

import os
import socket

import pytest
import torch

from harness.worker.channel import PARENT_LIMIT, Channel, ChannelError, HEADER, pair
from harness.worker.shared_memory import Buffer


def _channels():
    parent_end, worker_end = pair()
    return Channel(parent_end, PARENT_LIMIT), worker_end


def test_channel_a_reply_over_the_limit_is_refused_before_it_is_read():
    """A length prefix of 4 GiB - 1 is refused at once: nothing the size of the claim is allocated."""
    parent, worker = _channels()
    worker.sendall(HEADER.pack(0xFFFFFFFF) + b"{}")
    with pytest.raises(ChannelError):
        parent.recv(deadline=None)


def test_channel_a_reply_that_is_not_plain_json_is_refused():
    parent, worker = _channels()
    for body in (b"\x80\x04K\x01.", b"[" * 5000 + b"]" * 5000, b'{"op": NaN}'):  # a pickle, deep nesting, NaN
        worker.sendall(HEADER.pack(len(body)) + body)
        with pytest.raises(ChannelError):
            parent.recv(deadline=None)


def test_channel_descriptors_a_worker_attaches_are_never_taken():
    parent, worker = _channels()
    body = b'{"op": "output"}'
    read_end, write_end = os.pipe()
    try:
        socket.send_fds(worker, [HEADER.pack(len(body)) + body], [read_end])
        before = set(os.listdir("/proc/self/fd"))
        message, fds = parent.recv(deadline=None)
        assert message == {"op": "output"} and fds == []
        assert set(os.listdir("/proc/self/fd")) <= before  # no descriptor arrived in this process
    finally:
        os.close(read_end)
        os.close(write_end)


def test_memory_a_worker_cannot_shrink_the_shared_inputs():
    """The parent's CPU buffers are sealed at their size: the descriptor a worker holds cannot
    truncate them (which would crash the parent with SIGBUS when it next reads them)."""
    buffer = Buffer(1 << 16, "cpu")
    view = buffer.bytes_tensor()
    view.fill_(7)
    with pytest.raises(OSError):
        os.ftruncate(buffer.fd, 16)
    assert os.fstat(buffer.fd).st_size >= 1 << 16 and int(view[-1]) == 7 and int(view.sum()) == 7 * view.numel()


def test_timer_a_workers_reply_never_becomes_the_parents_cpu_time():
    """On the CPU the parent's own clock around the call is the time; the device_s a worker
    reports is ignored (tests/test_fence.py holds the fenced GPU case)."""
    import time
    import types

    from harness.parent import sandbox

    box = object.__new__(sandbox.Sandbox)
    box.device = types.SimpleNamespace(type="cpu", is_gpu=False)
    box._slot = torch.zeros(2)
    box._send = lambda *a, **k: time.sleep(0.002)
    box._answer = lambda *a, **k: {"op": "output", "copied": True, "device_s": 1e-9, "host_s": 1e-9,
                                   "tail_s": 0.0, "caught_up": False, "replaced": [],
                                   "layout": {"shape": [2], "dtype": "float32", "device": "cpu"}}
    _, timing = box.call(timed=True, timeout=5)
    assert timing.device_s >= 0.002  # the parent's wall clock, not the forged nanosecond


def test_worker_modules_do_not_stand_in_for_a_submissions_imports(tmp_path):
    """The worker runs as a script from harness/worker/, whose modules (profiled, timer, channel, ...)
    must not shadow the standard library's or a package's for the submission: `import cProfile`
    (what torch.compile's stack imports) needs the standard `profile`, and there is no `timer`."""
    from conftest import ROOT, cli

    code = (ROOT / "submissions" / "torch_loop.py").read_text()
    probe = tmp_path / "imports_profile.py"
    probe.write_text(code + "\n\nimport cProfile, profile  # noqa: E401\nassert hasattr(profile, 'run')\n"
                     "try:\n    import timer\nexcept ImportError:\n    pass\nelse:\n    raise AssertionError('harness/worker/timer.py was importable as timer')\n")
    assert cli(tmp_path, "--mode", "test", "--sandbox", "off", "--submission", str(probe)) == 0
