"""Ranks that respect noise: a 95% interval for a submission's score, and tie groups over them.

The interval is a percentile bootstrap over the timed calls a run keeps (CaseResult.samples): each
resample draws every benchmark case's calls again with replacement, takes each case's median and
scores the medians as the task ranks (geometric mean by default); the 2.5th and 97.5th percentiles
of BOOTSTRAP_RESAMPLES such scores bound it. The generator is seeded (BOOTSTRAP_SEED), so the same
samples always give the same interval. It covers the noise among one run's calls, not what moves a
whole run (another allocation of the inputs, the GPU's state): where runs of one file spread wider
than their intervals, RUN_TO_RUN_REL (a relative half-width measured over repeated runs) widens
every interval by that much, added in quadrature to each side.

Tie groups (`tie_groups`): in score order, a row ties with the leader of the current group when its
interval reaches the leader's (its low end at or below the leader's high end); otherwise it leads
a new group. Overlap is not transitive (A may overlap B and B overlap C while A and C are apart), so
groups are anchored on their leader: a row joins only the group whose leader its interval reaches,
never a chain of neighbours. Members share the leader's rank, shown "=N"; the next group's rank
counts every row before it (1, =2, =2, 4).
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Optional, Sequence, TypeVar

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 41
CONFIDENCE = 0.95
# The run-to-run spread of a score beyond its calls' noise, as a 95% relative half-width: 1.96 x the
# pooled standard deviation, beyond the within-run one, of the geomeans of the bundled Triton files
# and a 3%-slowed copy over five seeds of the fenced leaderboard on the H200 (0.62%) and five on the
# H100 (0.73%), pooled: 0.68% (BENCHMARKS.md).
RUN_TO_RUN_REL = 0.0133
_CHUNK = 1 << 20  # resampled values drawn at once (memory stays under ~10 MB per case)

TIE_RULE = ("ties: each score's 95% interval is a seeded percentile bootstrap of the score over the cases' "
            "timed calls (each case's calls resampled, its median taken, the medians scored as the task ranks), "
            f"widened by the run-to-run spread (±{RUN_TO_RUN_REL:.1%} in quadrature); "
            "in score order a row ties with its group's leader when their intervals overlap, else it leads the "
            "next group (groups anchored on leaders: overlap is not transitive); tied rows show =N")

Row = TypeVar("Row")


def score(medians: Sequence[float], ranking: str) -> float:
    """The ranking's score of per-case medians: "geom" (geometric mean), "mean", or "last"."""
    if ranking == "geom":
        return math.exp(sum(math.log(m) for m in medians) / len(medians))
    if ranking == "mean":
        return sum(medians) / len(medians)
    return medians[-1]


def score_interval(case_samples: Sequence[Sequence[float]], ranking: str = "geom") -> Optional[tuple[float, float]]:
    """The 95% bootstrap interval of the ranking's score over per-case samples (module docstring),
    in the samples' unit, widened to hold the score of the medians themselves; None when a case has
    no samples or a sample is not positive."""
    key = tuple(tuple(float(x) for x in s) for s in case_samples)
    if not key or any(not s or min(s) <= 0 or not all(map(math.isfinite, s)) for s in key):
        return None
    return _interval(key, ranking, RUN_TO_RUN_REL)


@functools.lru_cache(maxsize=512)
def _interval(case_samples: tuple[tuple[float, ...], ...], ranking: str, run_to_run: float) -> tuple[float, float]:
    import numpy as np

    rng = np.random.default_rng(BOOTSTRAP_SEED)
    medians = np.empty((BOOTSTRAP_RESAMPLES, len(case_samples)))
    for j, samples in enumerate(case_samples):
        x = np.asarray(samples, dtype=np.float64)
        step = max(1, _CHUNK // len(x))
        for start in range(0, BOOTSTRAP_RESAMPLES, step):
            rows = min(step, BOOTSTRAP_RESAMPLES - start)
            medians[start:start + rows, j] = np.median(x[rng.integers(0, len(x), size=(rows, len(x)))], axis=1)
    if ranking == "geom":
        scores = np.exp(np.log(medians).mean(axis=1))
    elif ranking == "mean":
        scores = medians.mean(axis=1)
    else:
        scores = medians[:, -1]
    tail = (1 - CONFIDENCE) / 2
    lo, hi = (float(v) for v in np.quantile(scores, [tail, 1 - tail]))
    point = score([float(np.median(np.asarray(s))) for s in case_samples], ranking)
    lo, hi = min(lo, point), max(hi, point)
    if run_to_run:
        extra = run_to_run * point
        lo, hi = point - math.hypot(point - lo, extra), point + math.hypot(hi - point, extra)
    return lo, hi


def tie_groups(ordered: Sequence[Row], score_of: Callable[[Row], float],
               interval_of: Callable[[Row], Optional[tuple[float, float]]]) -> list[int]:
    """For rows already in score order (best first), each row's group: the index in `ordered` of the
    group's leader. A row without an interval counts as the point (score, score)."""
    groups: list[int] = []
    leader_high = -math.inf
    for i, row in enumerate(ordered):
        low, _ = interval_of(row) or (score_of(row), score_of(row))
        if i and low <= leader_high:
            groups.append(groups[-1])
            continue
        groups.append(i)
        leader_high = (interval_of(row) or (score_of(row), score_of(row)))[1]
    return groups


def rank_labels(groups: Sequence[int], prefix: str = "") -> list[str]:
    """Rank labels for `tie_groups`' output: the leader's position (1-based) for every member of a
    group, "=N" where the group has more than one member; `prefix` before the number ("u")."""
    sizes = {g: groups.count(g) for g in groups}
    return [("=" if sizes[g] > 1 else "") + f"{prefix}{g + 1}" for g in groups]
