"""Static scan of a submission's source with kernelguard (PyPI, MIT): flags for review.

Runs in the parent on the source text only (kernelguard parses, it does not execute). Findings
are recorded and shown beside the verdict; they never change it: the runtime defences decide.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class ScanResult:
    classification: str              # kernelguard's: clean / low_confidence / suspicious / hacked, or "not scanned"
    flags: tuple[str, ...]           # "PATTERN (severity): evidence"

    def summary(self) -> str:
        if not self.flags:
            return self.classification
        names = sorted({f.split(" ", 1)[0] for f in self.flags})
        return f"{self.classification}: {', '.join(names)}"


def scan(path: Path) -> ScanResult:
    try:
        import kernelguard
    except ImportError:
        return ScanResult("not scanned (kernelguard not installed)", ())
    try:
        found = kernelguard.analyze_code(path.read_text(errors="replace"), compute_structural_hash=False)
    except Exception as exc:  # a scanner bug must not stop an evaluation
        return ScanResult(f"not scanned (kernelguard failed: {type(exc).__name__})", ())
    flags = tuple(f"{m.get('pattern', '?')} ({m.get('severity', '?')}): {m.get('evidence', '')}"[:300]
                  for m in found.get("matched_patterns", []))
    return ScanResult(str(found.get("classification", "unknown")), flags)
