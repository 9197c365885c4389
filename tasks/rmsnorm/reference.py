"""RMSNorm, the harness's second task (task.yml beside this file): inputs, the reference, the check.

The interface the harness calls is the one harness/task/problem.py lists; nothing here is specific to
the harness's other task.
"""

from __future__ import annotations

import torch


def generate_input(rows: int, cols: int, seed: int, device: str = "cpu") -> tuple:
    """(x (rows, cols) fp32, weight (cols,) fp32, eps): channels of very different scale, so a
    missing weight or a mean over the wrong axis shows."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(rows, cols, generator=g) * torch.logspace(-1, 1, cols)
    weight = 1 + 0.5 * torch.randn(cols, generator=g)
    return x.to(device), weight.to(device), 1e-6


def reference_outputs(data: tuple) -> torch.Tensor:
    x, weight, eps = data
    x64 = x.double()
    return (x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * weight.double()).float()


def check_ratio(output: torch.Tensor, expected: torch.Tensor, policy: str, params: dict) -> tuple[float, str]:
    """Relative L2 error over the whole output and of the worst row, over their limits (below 1 passes)."""
    diff = (output.double() - expected.double())
    whole = float(diff.norm() / expected.double().norm().clamp(min=1e-30))
    rows = float((diff.norm(dim=-1) / expected.double().norm(dim=-1).clamp(min=1e-30)).amax())
    ratio = max(whole / params["rel_l2"], rows / params["row_rel_l2"])
    return ratio, f"rel L2 {whole:.1e} (limit {params['rel_l2']:.0e}), worst row {rows:.1e} (limit {params['row_rel_l2']:.0e})"


def check_output(output: torch.Tensor, expected: torch.Tensor, policy: str, params: dict) -> tuple[bool, str]:
    ratio, text = check_ratio(output, expected, policy, params)
    return (True, f"matches: {text}") if ratio <= 1 else (False, f"output differs from the reference: {text}")


def output_layout(data: tuple) -> tuple[tuple[int, ...], torch.dtype]:
    return tuple(data[0].shape), torch.float32


def selftest_outputs(data: tuple, other: tuple, seed: int) -> dict[str, tuple[torch.Tensor, bool]]:
    """Honest fp32 outputs (two summation orders) must pass; cheap wrong answers must fail."""
    x, weight, eps = data
    expected = reference_outputs(data)
    plain = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
    reversed_sum = x * torch.rsqrt(x.flip(-1).pow(2).sum(-1, keepdim=True) / x.shape[-1] + eps) * weight
    return {
        "fp32": (plain, True),
        "fp32, other summation order": (reversed_sum, True),
        "zeros": (torch.zeros_like(expected), False),
        "no weight": (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), False),
        "bf16 rounding": (expected.bfloat16().float(), False),
        "another seed's answer": (reference_outputs(other), False),
    }


def case_label(args: dict) -> str:
    return f"{args['rows']}×{args['cols']}"


def bytes_moved(data: tuple) -> dict[str, int]:
    """Least traffic: x read once, the output written once, the weight read once."""
    x, weight, _ = data
    return {"fp32": 2 * x.numel() * 4 + weight.numel() * 4}
