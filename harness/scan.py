"""Static scan of a submission's source with kernelguard (PyPI, MIT): flags for review.

Runs in the parent on the source text only (kernelguard parses, it does not execute). Findings
are recorded and shown beside the verdict; they never change it: the runtime defences decide.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

try:  # imported with this module, before any worker starts (harness/cli.py)
    import kernelguard
except ImportError:
    kernelguard = None


@dataclasses.dataclass(frozen=True)
class ScanResult:
    classification: str              # kernelguard's: clean / low_confidence / suspicious / hacked, or "not scanned"
    flags: tuple[str, ...]           # "PATTERN (severity): evidence"

    def summary(self) -> str:
        if not self.flags:
            return self.classification
        names = sorted({f.split(" ", 1)[0] for f in self.flags})
        return f"{self.classification}: {', '.join(names)}"


def declared_variant(path: Path, variants: list[str]) -> str:
    """Which input variant (for this task: the KV format) a submission reads, from its source,
    without running it: a top-level `KV_FORMAT = "fp8"` (or `"mxfp4+fp8"` for a file that reads
    two) if present, else the variants named in subscripts such as `kv_data["fp8"]` when one or
    two are (two joined by "+", in the task's order), else the first variant (the widest); "" for
    a task without variants."""
    if not variants:
        return ""
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except SyntaxError:
        return variants[0]
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "KV_FORMAT" for t in node.targets)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            named = node.value.value.split("+")
            if 1 <= len(named) <= 2 and all(v in variants for v in named):
                return "+".join(v for v in variants if v in named)
    used = {n.slice.value for n in ast.walk(tree)
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value in variants}
    return "+".join(v for v in variants if v in used) if 1 <= len(used) <= 2 else variants[0]


def scan(path: Path) -> ScanResult:
    if kernelguard is None:
        return ScanResult("not scanned (kernelguard not installed)", ())
    try:
        found = kernelguard.analyze_code(path.read_text(errors="replace"), compute_structural_hash=False)
    except Exception as exc:  # a scanner bug must not stop an evaluation
        return ScanResult(f"not scanned (kernelguard failed: {type(exc).__name__})", ())
    flags = tuple(f"{m.get('pattern', '?')} ({m.get('severity', '?')}): {m.get('evidence', '')}"[:300]
                  for m in found.get("matched_patterns", []))
    return ScanResult(str(found.get("classification", "unknown")), flags)
