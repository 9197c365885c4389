"""Judging one output, in the trusted parent: structure first, then the task's value check.

Every rejection is one line a competitor can act on.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Iterator

import torch


@dataclasses.dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str  # why it failed, or what it matched


def tensors(tree: Any, path: str = "data") -> Iterator[tuple[str, torch.Tensor]]:
    """(path, tensor) for every tensor in nested tuples/lists/dicts."""
    if isinstance(tree, torch.Tensor):
        yield path, tree
    elif isinstance(tree, (tuple, list)):
        for i, x in enumerate(tree):
            yield from tensors(x, f"{path}[{i}]")
    elif isinstance(tree, dict):
        for k, x in tree.items():
            yield from tensors(x, f"{path}[{k!r}]")


def index_ranges(indices: Iterable[int], limit: int = 6) -> str:
    """Indices as compact ranges, "0-3, 7, 9-12"; past `limit` ranges, the rest is counted, so
    a failure reason stays one short line however many rows are off."""
    spans: list[list[int]] = []
    for i in sorted(set(indices)):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans[:limit])
    rest = sum(b - a + 1 for a, b in spans[limit:])
    return text + (f" and {rest} more" if rest else "")


def judge(output: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device,
          inputs_before: Any, inputs_after: Any, value_check: Callable[[torch.Tensor], tuple[bool, str]]) -> Verdict:
    if type(output) is not torch.Tensor:
        return Verdict(False, f"output is a {type(output).__name__}, not a plain torch.Tensor")
    if tuple(output.shape) != tuple(shape):
        return Verdict(False, f"output shape {tuple(output.shape)}, expected {tuple(shape)}")
    if output.dtype != dtype:
        return Verdict(False, f"output dtype {output.dtype}, expected {dtype}")
    if output.device.type != device.type:
        return Verdict(False, f"output on {output.device}, expected on {device.type}")
    for (name, before), (_, after) in zip(tensors(inputs_before), tensors(inputs_after)):
        if not torch.equal(before.view(torch.uint8) if before.element_size() == 1 else before,
                           after.view(torch.uint8) if after.element_size() == 1 else after):
            return Verdict(False, f"custom_kernel modified its input {name}")
    finite = torch.isfinite(output)
    if not bool(finite.all()):
        bad = int((~finite).sum())
        return Verdict(False, f"output has {bad} NaN/inf values")
    ok, message = value_check(output)
    return Verdict(ok, message)
