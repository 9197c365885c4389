"""What an evaluation produced: plain data, no torch. Everything downstream of the engine (report,
store, plots, popcorn, the pool and Ray) reads these."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Callable, Optional, Sequence, TypeVar

from harness.ties import rank_labels, score, score_interval, tie_groups
from harness.timing import Stats


# What times a CPU run's calls, as its results say (a prefix: harness/parent/context.py may add to it).
CPU_TIMING = "unverified: CPU (the parent's clock around each call; Triton kernels in its interpreter)"

@dataclasses.dataclass
class CaseResult:
    kind: str            # "test" or "benchmark"
    index: int
    name: str
    ok: bool
    reason: str = ""     # why it failed (or what it matched)
    device: Optional[Stats] = None  # device time per call (benchmark cases)
    host: Optional[Stats] = None    # host time per call
    tail: Optional[Stats] = None    # device-wide synchronize after each timed call (other streams)
    bytes: Optional[int] = None     # bytes the submission's variant must move at least (roofline)
    warnings: tuple[str, ...] = ()  # why the numbers may be unreliable
    profile: str = ""
    audit_s: Optional[float] = None  # the profiler's GPU time per call (harness/parent/audit.py)
    args: dict = dataclasses.field(default_factory=dict)  # the case's generate_input arguments
    samples: tuple[float, ...] = ()  # every timed call's device seconds, in order (exported to JSON)
    caught_up: tuple[bool, ...] = ()  # per timed call: the GPU had passed the start event when the call
                                      # returned, so it may have waited for launches (exported to JSON)
    kernel: Optional[Stats] = None  # fenced runs: calls timed by the worker's own events (a diagnostic;
                                    # `device` is the parent's measurement, the number that ranks)
    slot_copy_s: Optional[float] = None  # fenced runs: what the output's copy into the slot costs inside
                                    # the ranked number (the fence's null calls; not subtracted)
    fence_s: Optional[float] = None  # fenced runs: the fence's own cost subtracted from a reading (its
                                    # median null call at the case's first input + output bytes; a reading
                                    # below it is counted less the fastest null call instead)
    clocks: dict = dataclasses.field(default_factory=dict)  # the GPU's clocks, temperature, power and
                                    # throttling over the timed calls (harness/parent/gpuwatch.py; {} where not watched)
    energy_j: Optional[float] = None  # --energy: joules per call, from a burst of calls back to back (harness/parent/gpuwatch.py)
    energy_err_j: Optional[float] = None  # its bound from the energy counter's update period (±)
    energy_note: str = ""           # why there is no energy figure ("too short to measure: ...")
    competition: Optional[Stats] = None  # --diagnostics: calls timed the competition's way (its mean is shown)
    isolated: Optional[Stats] = None     # --diagnostics: wall time of isolated calls (call + synchronize)


# What the static scan (harness/parent/scan.py) found in a file: plain data, kept with its result.
SYNTAX_ERROR = "syntax error"  # the classification of a file that does not compile
_FLAG = re.compile(r"(?P<name>[A-Z][A-Z0-9_]*)(?: \(\w+\))?(?: line (?P<line>\d+))?: (?P<meaning>.*?)"
                   r"(?: \[kernelguard: .*)?$")


@dataclasses.dataclass(frozen=True)
class ScanResult:
    classification: str              # clean / low_confidence / suspicious / hacked (kernelguard's; its "valid"
                                     # reads "clean"), "syntax error", or "not scanned (why)"
    flags: tuple[str, ...]           # "PATTERN (severity) line N: meaning [kernelguard: evidence]";
                                     # "SYNTAX_ERROR line N: message" for a file that does not compile

    def summary(self) -> str:
        """One line: the classification, then per flagged pattern its lines and its meaning, e.g.
        "low_confidence: DECODE_MM_REF line 30 (the output comes from a torch matmul ...)"."""
        if not self.flags:
            return self.classification
        if self.classification == SYNTAX_ERROR:
            found = _FLAG.match(self.flags[0])
            line = f" at line {found['line']}" if found and found["line"] else ""
            return f"{SYNTAX_ERROR}{line}: {found['meaning'] if found else self.flags[0]}"
        patterns: dict[str, tuple[list[str], str]] = {}
        for flag in self.flags:
            found = _FLAG.match(flag)
            name = found["name"] if found else flag.split(" ", 1)[0]
            lines, meaning = patterns.setdefault(name, ([], found["meaning"] if found else ""))
            if found and found["line"] and found["line"] not in lines:
                lines.append(found["line"])
        parts = []
        for name in sorted(patterns):
            lines, meaning = patterns[name]
            where = f" line{'s' if len(lines) > 1 else ''} {', '.join(sorted(lines, key=int))}" if lines else ""
            parts.append(f"{name}{where}" + (f" ({meaning})" if meaning else ""))
        return f"{self.classification}: {'; '.join(parts)}"


@dataclasses.dataclass
class SubmissionResult:
    path: str
    sha256: str
    ok: bool = True
    error: str = ""      # a failure that stopped the whole submission (import, crash, ...)
    cases: list[CaseResult] = dataclasses.field(default_factory=list)
    log: str = ""
    scan: ScanResult = ScanResult("not scanned", ())
    variant: str = ""    # the input variant it reads (KV format), for the roofline
    phases: dict[str, float] = dataclasses.field(default_factory=dict)  # where the wall time went, s
    sandboxed: bool = False  # its worker ran inside the OS sandbox
    audit: str = "not audited"  # what establishes its timings: "verified: ..." (the parent's fence,
                                # harness/parent/fence.py) or "unverified: ..." / the profiler's audit (harness/parent/audit.py)
    companion: str = ""  # after failing tests: its verdict on the task's companion (task.yml `companion`)
    display: str = ""    # its name where another submission of the run has the same file name

    @property
    def verified(self) -> bool:
        """Whether its times were measured outside its process (the parent's fence)."""
        return is_verified(self.audit)

    @property
    def name(self) -> str:
        return self.display or Path(self.path).name

    def geomean_roofline(self, bandwidth: Optional[float]) -> Optional[float]:
        """Geometric mean over benchmark cases of achieved bytes/s over the device's bandwidth."""
        fractions = [c.bytes / c.device.median / bandwidth for c in self.cases
                     if c.kind == "benchmark" and c.ok and c.device and c.bytes and bandwidth]
        return geomean(fractions) if self.ok else None

    def geomean_us(self) -> Optional[float]:
        return self.score_us("geom")

    def timed_cases(self) -> list[CaseResult]:
        """The benchmark cases with a median: what the score is made of."""
        return [c for c in self.cases if c.kind == "benchmark" and c.ok and c.device]

    def score_interval_us(self, ranking: str) -> Optional[tuple[float, float]]:
        """The 95% interval of `score_us(ranking)`, in µs, from every timed call the run kept
        (harness/ties.py: a seeded bootstrap); None without a score or where a case kept no calls."""
        cases = self.timed_cases()
        if self.score_us(ranking) is None or any(not c.samples for c in cases):
            return None
        interval = score_interval([c.samples for c in cases], ranking)
        return (interval[0] * 1e6, interval[1] * 1e6) if interval else None

    def geomean_energy_j(self) -> Optional[float]:
        """Geometric mean over benchmark cases of joules per call (--energy); None unless every timed
        case has an energy figure (a mean over some cases would not compare with another file's)."""
        cases = self.timed_cases()
        if not self.ok or not cases or any(c.energy_j is None or c.energy_j <= 0 for c in cases):
            return None
        return geomean([c.energy_j for c in cases])

    def score_us(self, ranking: str) -> Optional[float]:
        """The number the leaderboard ranks by (task.yml `ranking`), in µs: the geometric ("geom")
        or arithmetic ("mean") mean of the per-case medians, or the last case's median ("last")."""
        times = [c.device.median for c in self.timed_cases()]
        if not self.ok or not times:
            return None
        return score(times, ranking) * 1e6


Row = TypeVar("Row")


def ranked(rows: Sequence[Row], score: Callable[[Row], Optional[float]], verified: Callable[[Row], bool],
           name: Callable[[Row], str],
           interval: Optional[Callable[[Row], Optional[tuple[float, float]]]] = None) -> list[tuple[Row, str]]:
    """The leaderboard's order and rank labels: scores measured outside the submission's process
    first (1, 2, ...), unverified ones after them and apart (u1, u2, ...), unscored rows last ("-").
    With `interval` (a row's score's 95% interval, or None), rows whose intervals overlap their
    group's leader's share its rank, shown "=1" ("=u1"): harness/ties.py states the rule."""
    ordered = sorted(rows, key=lambda r: (score(r) is None, not verified(r), score(r) or 0.0, name(r)))
    labels: dict[int, str] = {}
    for kind, prefix in ((True, ""), (False, "u")):
        part = [r for r in ordered if score(r) is not None and verified(r) == kind]
        groups = tie_groups(part, score, interval) if interval else list(range(len(part)))
        labels.update({id(r): label for r, label in zip(part, rank_labels(groups, prefix))})
    return [(r, labels.get(id(r), "-")) for r in ordered]


def tie_group(rank: str) -> Optional[str]:
    """The group a rank label belongs to ("=2" and "2": group "2"; "=u1": "u1"), None for "-" or ""."""
    return None if rank in ("-", "") else rank.lstrip("=")


def display_names(paths: list[str]) -> dict[str, str]:
    """Names that tell the run's submissions apart: the file name, with its folder where two
    submissions share a file name (the whole path where that is not enough)."""
    names = {p: Path(p).name for p in paths}
    for p in paths:
        if sum(Path(q).name == names[p] for q in paths) > 1:
            names[p] = f"{Path(p).parent.name}/{Path(p).name}"
    for p in paths:
        if sum(names[q] == names[p] for q in paths) > 1:
            names[p] = str(p)
    return names


def is_verified(timing: str) -> bool:
    """Whether a result's timing note (SubmissionResult.audit, stored as is) says its numbers were
    measured outside the submission's process."""
    return timing.startswith("verified")


CPU_TIMING_METHOD = "CPU wall clock, unverified"  # a CPU run's timing method, as runs and exports name it


def is_cpu_timed(timing: str) -> bool:
    """Whether a result's timing note (SubmissionResult.audit) says it was timed on the CPU: the
    parent's clock around each call, Triton kernels in its interpreter. Such times show that timing
    works; they rank nothing a GPU would."""
    return timing.startswith(CPU_TIMING)


def cpu_timed(results: Sequence[SubmissionResult]) -> bool:
    """Whether any of a run's results was timed on the CPU (then its tables and exports rank nothing)."""
    return any(is_cpu_timed(r.audit) for r in results)


def board_order(results: Sequence[SubmissionResult], ranking: str = "geom") -> list[tuple[SubmissionResult, str]]:
    """The leaderboard's rows and rank labels, as the terminal table, the exports and the plots show
    them: `ranked` by the task's ranking; on the CPU (`cpu_timed`) no ranks at all ("" each), the
    results with a score first, each part by name, so no order reads as a ranking. Rows whose
    scores' 95% intervals overlap share a rank ("=1": harness/ties.py)."""
    if cpu_timed(results):
        return [(r, "") for r in sorted(results, key=lambda r: (r.score_us(ranking) is None, r.name))]
    return ranked(results, lambda r: r.score_us(ranking), lambda r: r.verified, lambda r: r.name,
                  lambda r: r.score_interval_us(ranking))


def geomean(values: list[float]) -> Optional[float]:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None
