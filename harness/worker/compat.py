"""The `task` and `utils` modules GPU MODE competition files import, provided without extra files.

Competition submissions start with `from task import input_t, output_t` and sometimes
`from utils import ...`; reference-kernels ships those as files next to the submission. We
register equivalent modules in `sys.modules` inside the worker before the submission is imported.
Only public, harmless helpers are offered: the checker the verdict relies on lives in the
trusted parent, not here.
"""

from __future__ import annotations

import random
import sys
import types
from typing import TypedDict, TypeVar

import torch


class TestSpec(TypedDict, total=False):
    batchsize: int
    qseqlen: int
    kvseqlen: int
    seed: int


def _task_module() -> types.ModuleType:
    mod = types.ModuleType("task", "Types of the amd-mixed-mla task (provided by the harness).")
    mod.input_t = TypeVar("input_t", bound=tuple)
    mod.output_t = TypeVar("output_t", bound=torch.Tensor)
    mod.TestSpec = TestSpec
    return mod


def set_seed(seed: int = 42) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def get_device(use_cuda: bool = True) -> torch.device:
    return torch.device("cuda" if use_cuda and torch.cuda.is_available() else "cpu")


def verbose_allclose(received: torch.Tensor, expected: torch.Tensor, rtol: float = 1e-5,
                     atol: float = 1e-8, max_print: int = 5) -> list[str]:
    """Mismatch descriptions (empty when all elements are within atol + rtol·|expected|)."""
    if received.shape != expected.shape:
        return [f"SIZE MISMATCH: {tuple(received.shape)} vs {tuple(expected.shape)}"]
    r, e = received.float(), expected.float()
    bad = ~torch.isclose(r, e, rtol=rtol, atol=atol, equal_nan=True)
    idx = bad.nonzero()
    lines = [f"ERROR at {tuple(i.tolist())}: {r[tuple(i)].item()} {e[tuple(i)].item()}" for i in idx[:max_print]]
    if len(idx) > max_print:
        lines.append(f"... and {len(idx) - max_print} more mismatched elements.")
    return lines


def verbose_allequal(received: torch.Tensor, expected: torch.Tensor, max_print: int = 5) -> list[str]:
    return verbose_allclose(received, expected, rtol=0.0, atol=0.0, max_print=max_print)


def _utils_module() -> types.ModuleType:
    mod = types.ModuleType("utils", "GPU MODE utils helpers (provided by the harness).")
    for fn in (set_seed, get_device, verbose_allclose, verbose_allequal):
        setattr(mod, fn.__name__, fn)
    return mod


def install() -> None:
    """Make `import task` and `import utils` resolve to the modules above."""
    sys.modules.setdefault("task", _task_module())
    sys.modules.setdefault("utils", _utils_module())
