"""fp8 and mxfp4 encode/decode: known values, layout, round trips, per-vendor fp8 choice."""

import torch

from harness.device import DeviceInfo, fp8_dtype
from harness.task.quant import (E2M1_VALUES, dequantize_fp8, dequantize_mxfp4, quantize_fp8, quantize_mxfp4)


def test_mxfp4_known_block():
    # amax 6 -> shared exponent 2**(floor(log2(6)) - 2) = 1: values land on the e2m1 grid as they are
    x = torch.tensor([[0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0] * 2 + [-0.5, -6.0] + [0.0] * 14])
    packed, scales = quantize_mxfp4(x)
    assert packed.shape == (1, 16) and packed.dtype == torch.uint8
    assert scales.shape == (1, 24) and scales.view(torch.uint8)[0, 0] == 127
    # low nibble = even element: bytes are (code[2i] | code[2i+1] << 4)
    assert packed[0, 0] == (0 | 1 << 4) and packed[0, 3] == (6 | 7 << 4)
    assert packed[0, 8] == (0b1001 | 0b1111 << 4)  # -0.5 and -6: sign bit 3
    assert torch.equal(dequantize_mxfp4(packed, scales), x)


def test_mxfp4_rounding_ties_to_even_and_saturation():
    x = torch.zeros(1, 32)
    x[0, :5] = torch.tensor([0.25, 0.75, 5.0, 6.0, 1.25])  # ties: 0|0.5, 0.5|1, 4|6, exact, 1|1.5
    x[0, 5] = 6.0
    deq = dequantize_mxfp4(*quantize_mxfp4(x))
    assert deq[0, :5].tolist() == [0.0, 1.0, 4.0, 6.0, 1.0]


def test_mxfp4_scale_layout_18_live_blocks_row_stride_24():
    x = torch.randn(300, 1, 576)
    packed, scales = quantize_mxfp4(x)
    assert packed.shape == (300, 1, 288)
    assert scales.shape == (300, 24) and scales.stride(0) == 24
    assert (scales.view(torch.uint8)[:, 18:] == 127).all()


def test_mxfp4_round_trip_is_exact_and_error_bounded():
    x = torch.randn(64, 576) * torch.logspace(-3, 3, 576)  # wide dynamic range across blocks
    packed, scales = quantize_mxfp4(x)
    deq = dequantize_mxfp4(packed, scales)
    p2, s2 = quantize_mxfp4(deq)
    assert torch.equal(p2, packed) and torch.equal(s2.view(torch.uint8), scales.view(torch.uint8))
    # each element is within half an e2m1 step of the block's scale (step <= 2 * scale)
    block_scale = torch.exp2(scales.view(torch.uint8)[:, :18].float() - 127).repeat_interleave(32, dim=1)
    assert ((deq - x).abs() <= block_scale * 2.0 + 1e-6 * x.abs()).all()
    assert set(deq.div(block_scale).abs().unique().tolist()) <= set(E2M1_VALUES)


def test_fp8_scale_and_round_trip():
    x = torch.randn(1000, 576) * 3
    q, scale = quantize_fp8(x, torch.float8_e4m3fn)
    assert scale.shape == (1,) and scale.dtype == torch.float32
    assert torch.isclose(scale, x.abs().max() / 448)
    deq = dequantize_fp8(q, scale)
    assert ((deq - x).abs() <= x.abs() / 16 + scale).all()  # 3 mantissa bits
    q2, scale2 = quantize_fp8(deq, torch.float8_e4m3fn)
    assert torch.equal(q2.view(torch.uint8), q.view(torch.uint8))


def test_fp8_dtype_per_vendor_and_arch():
    def dev(vendor, arch):
        return DeviceInfo("cuda", vendor, "x", arch, 1 << 20)
    assert fp8_dtype(dev("amd", "gfx942")) == torch.float8_e4m3fnuz   # MI300
    assert fp8_dtype(dev("amd", "gfx950")) == torch.float8_e4m3fn     # MI355X
    assert fp8_dtype(dev("nvidia", "sm_90")) == torch.float8_e4m3fn
    assert fp8_dtype(DeviceInfo("cpu", "cpu", "x", "x86_64", 0)) == torch.float8_e4m3fn


def test_detect_on_a_simulated_rocm_gpu(monkeypatch):
    """The ROCm branch, without ROCm: torch.version.hip set, gcnArchName as ROCm reports it."""
    import types

    import harness.device as device

    for arch, expected in (("gfx942:sramecc+:xnack-", torch.float8_e4m3fnuz), ("gfx950", torch.float8_e4m3fn)):
        props = types.SimpleNamespace(name="AMD Instinct MI3xx", gcnArchName=arch, L2_cache_size=4 << 20,
                                      major=9, minor=4)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
        monkeypatch.setattr(torch.version, "hip", "6.4.0")
        info = device.detect()
        assert (info.vendor, info.arch, info.l2_bytes, info.count) == ("amd", arch.split(":")[0], 4 << 20, 8)
        assert fp8_dtype(info) == expected
        assert info.describe() == f"AMD Instinct MI3xx (amd, {arch.split(':')[0]})"


def test_detect_on_a_simulated_nvidia_gpu(monkeypatch):
    import types

    import harness.device as device

    props = types.SimpleNamespace(name="NVIDIA H200", L2_cache_size=60 << 20, major=9, minor=0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.version, "hip", None)
    info = device.detect()
    assert (info.vendor, info.arch, info.l2_bytes) == ("nvidia", "sm_90", 60 << 20)
    assert fp8_dtype(info) == torch.float8_e4m3fn
