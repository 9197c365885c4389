"""The three bundled Triton kernels share one block of code (split combine, launch plan, direct
launch), copied into each single file from triton_bf16.py by lab/shared_code.py, and the two
Gluon files a second one (the choice of their sm_90 path), from triton_fp8.py; the direct launch,
which relies on Triton internals, falls back to Triton's normal launch wherever it was not
measured or no longer fits."""

import shutil
import sys
from pathlib import Path

import pytest
import triton
from conftest import ROOT, TRITON_KERNELS, load_submission

sys.path.insert(0, str(ROOT / "lab"))
import shared_code  # noqa: E402

@pytest.mark.parametrize("spec", shared_code.BLOCKS, ids=lambda spec: spec.begin)
def test_every_copy_of_the_shared_code_agrees(spec):
    assert shared_code.differences(*spec) == {}, "run: python lab/shared_code.py --write"


def test_a_drifted_copy_of_the_sm90_block_is_named(tmp_path):
    spec = shared_code.BLOCKS[1]
    copy = tmp_path / "triton_mxfp4.py"
    text = (ROOT / "submissions" / "triton_mxfp4.py").read_text()
    copy.write_text(text.replace("== (9, 0)", "== (9, 1)"))
    diffs = shared_code.differences(spec.source, (copy,), spec.begin, spec.end)
    assert list(diffs) == [copy] and "+    return torch.cuda.get_device_capability(device) == (9, 1)" in diffs[copy]


def test_a_drifted_copy_is_named_and_rewritten(tmp_path):
    source, copy = (Path(shutil.copy(ROOT / "submissions" / n, tmp_path / n)) for n in ("triton_bf16.py", "triton_fp8.py"))
    text = copy.read_text()
    copy.write_text(text.replace("splits = max(1, splits)", "splits = max(2, splits)"))
    diffs = shared_code.differences(source, (copy,))
    assert list(diffs) == [copy]
    assert "-    splits = max(1, splits)" in diffs[copy] and "+    splits = max(2, splits)" in diffs[copy]
    assert shared_code.write(source, (copy,)) == [copy]
    assert shared_code.differences(source, (copy,)) == {} and copy.read_text() == text


def test_a_file_without_its_marks_is_refused(tmp_path):
    copy = tmp_path / "triton_fp8.py"
    copy.write_text((ROOT / "submissions" / "triton_fp8.py").read_text().replace(shared_code.END, "# (end)"))
    with pytest.raises(shared_code.SharedCodeError, match="triton_fp8.py: needs exactly one"):
        shared_code.differences(ROOT / "submissions" / "triton_bf16.py", (copy,))


class _Compiled:
    """Stands in for Triton's compiled kernel: `[grid]` gives a runner that records its calls."""
    packed_metadata = object()

    def __init__(self, calls: list, runner_error: Exception = None):
        self.calls, self.runner_error = calls, runner_error

    def __getitem__(self, grid):
        def run(*args):
            if self.runner_error:
                raise self.runner_error
            self.calls.append(("direct", grid, args))
        return run


class _Kernel:
    """Stands in for a Triton JIT function: `[grid](...)` records the call, returns a _Compiled."""
    arg_names = ["x", "stride", "B", "A"]

    def __init__(self, runner_error: Exception = None):
        self.calls, self.runner_error = [], runner_error

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.calls.append(("jit", grid, args, kwargs))
            return _Compiled(self.calls, self.runner_error)
        return run


@pytest.mark.parametrize("name", TRITON_KERNELS)
def test_direct_launch_reuses_the_compiled_kernel_only_for_the_same_specialization(name):
    """On a measured Triton version: the first launch goes through kernel[grid](...) and keeps the
    compiled kernel; the next launch with the same argument specialization calls it directly, with
    the constexprs appended in the kernel's parameter order and a 3-d grid; a tensor that is no
    longer 16-byte aligned, or another stride, goes through kernel[grid](...) again (Triton would
    compile another specialization)."""
    import torch

    module = load_submission(name, "launch")
    module._DIRECT_LAUNCH["on"] = True
    kernel, plan = _Kernel(), {"direct": {}}
    buf = torch.zeros(64)
    for x, stride in ((buf[:8], 8), (buf[:8], 8), (buf[1:9], 8), (buf[:8], 16), (buf[4:12], 8)):
        module._launch(plan, kernel, (5, 2), (x, stride), {"A": 1, "B": 2}, {"num_warps": 4})
    calls = kernel.calls
    assert [c[0] for c in calls] == ["jit", "direct", "jit", "jit", "direct"]
    assert calls[0][1] == (5, 2) and calls[0][3] == {"A": 1, "B": 2, "num_warps": 4}
    assert calls[1][1] == (5, 2, 1) and calls[1][2][1:] == (8, 2, 1)   # constexprs in parameter order


@pytest.mark.parametrize("version, direct", [("3.6.0", True), ("3.6.1+git4a2b", True), ("3.5.1", False),
                                             ("3.7.0", False), ("4.0.0", False), ("3.10.0", False)])
def test_direct_launch_is_on_only_for_a_measured_triton_version(monkeypatch, version, direct):
    monkeypatch.setattr(triton, "__version__", version)
    for name in TRITON_KERNELS:
        module = load_submission(name, "version")
        assert module._DIRECT_LAUNCH["on"] is direct, name
        if not direct:  # every launch takes the normal path, none keeps a compiled kernel
            kernel, plan = _Kernel(), {"direct": {}}
            for _ in range(3):
                module._launch(plan, kernel, (5, 2), (7, 8), {"A": 1, "B": 2}, {})
            assert [c[0] for c in kernel.calls] == ["jit"] * 3 and plan["direct"] == {}


@pytest.mark.parametrize("name", TRITON_KERNELS)
def test_a_runner_that_refuses_its_arguments_turns_the_direct_launch_off(name):
    """Triton internals that changed under a measured version number (a runner raising TypeError):
    the launch goes through kernel[grid](...) instead, and so does every later one."""
    module = load_submission(name, "refuses")
    module._DIRECT_LAUNCH["on"] = True
    kernel, plan = _Kernel(runner_error=TypeError("run() takes 9 positional arguments")), {"direct": {}}
    for _ in range(4):
        module._launch(plan, kernel, (5, 2), (7, 8), {"A": 1, "B": 2}, {})
    assert [c[0] for c in kernel.calls] == ["jit"] * 4
    assert module._DIRECT_LAUNCH["on"] is False and plan["direct"] == {}


@pytest.mark.parametrize("name", TRITON_KERNELS)
def test_other_errors_of_a_direct_launch_are_not_swallowed(name):
    module = load_submission(name, "raises")
    module._DIRECT_LAUNCH["on"] = True
    kernel, plan = _Kernel(runner_error=RuntimeError("CUDA error: an illegal memory access")), {"direct": {}}
    module._launch(plan, kernel, (5, 2), (7, 8), {"A": 1, "B": 2}, {})
    with pytest.raises(RuntimeError, match="illegal memory access"):
        module._launch(plan, kernel, (5, 2), (7, 8), {"A": 1, "B": 2}, {})
    assert module._DIRECT_LAUNCH["on"] is True
