"""The slowed copies of a bundled file (tests/slower/, issue 41's acceptance on the H200): on the
CPU they are the original, unchanged; they load the original and their helper by path, so the device
scripts run them as standalone files (lab/standalone.py packs tests/slower/ with them)."""

import importlib.util
import sys

import torch
from conftest import ROOT


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_on_the_cpu_a_slowed_file_returns_the_originals_output(tmp_path):
    original = tmp_path / "doubles.py"
    original.write_text("def custom_kernel(data):\n    return data[0] * 2\n")
    extra = load(ROOT / "tests" / "slower" / "_extra_work.py", "extra_work_test")
    kernel = extra.slower(original, 0.03)
    q = torch.arange(6.0).reshape(1, 2, 3)
    assert torch.equal(kernel((q, {}, torch.tensor([0, 1]), torch.tensor([0, 4]), {})), q * 2)


def test_the_copies_wrap_triton_fp8_with_their_fraction():
    for name, fraction in (("triton_fp8_plus3.py", 0.03), ("triton_fp8_plus10.py", 0.10)):
        module = load(ROOT / "tests" / "slower" / name, f"slowed_{name[:-3]}")
        assert module.FRACTION == fraction and module.custom_kernel.fraction == fraction
        assert module.custom_kernel.original.__module__ == "original_triton_fp8"


def test_standalone_copies_carry_the_helper_and_the_original():
    sys.path.insert(0, str(ROOT / "lab"))
    from standalone import standalone

    text = standalone(ROOT / "tests" / "slower" / "triton_fp8_plus3.py")
    assert "'tests/slower/_extra_work.py'" in text and "'submissions/triton_fp8.py'" in text
