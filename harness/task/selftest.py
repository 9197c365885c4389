"""Proving the check: legitimate outputs must pass it, cheap wrong answers must fail it.

For every active test and benchmark case, the task's `selftest_outputs` gives honest outputs
(one per precision path the contract allows) and null models (zeros, mean of V, subsets of the
tokens, another seed's answer, ...). Each goes through the check in force; the margin is
error / limit (below 1 passes). Runs in the trusted parent only; no submission is involved.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from harness.device import DeviceInfo, synchronize
from harness.task.problem import Problem
from harness.task.spec import Case

OTHER_SEED_OFFSET = 1_000_003


@dataclasses.dataclass(frozen=True)
class SelftestRow:
    case: Case
    worst_honest: tuple[float, str]   # (largest ratio among honest outputs, its name)
    best_null: tuple[float, str]      # (smallest ratio among null models, its name)
    wrong: list[str]                  # names whose verdict was wrong (honest failed / null passed)

    @property
    def ok(self) -> bool:
        return not self.wrong


def run_selftest(problem: Problem, device: DeviceInfo, small: bool,
                 progress: Callable[[Case], None] = lambda case: None) -> list[SelftestRow]:
    rows = []
    for case in problem.spec.cases("test", small) + problem.spec.cases("benchmark", small):
        progress(case)
        rows.append(selftest_case(problem, device, case))
    return rows


def selftest_case(problem: Problem, device: DeviceInfo, case: Case) -> SelftestRow:
    data = problem.generate(case.args, case.seed, device.torch_device)
    other = problem.generate(case.args, case.seed + OTHER_SEED_OFFSET, device.torch_device)
    expected = problem.expected(data)
    honest, null, wrong = [], [], []
    for name, (output, should_pass) in problem.reference.selftest_outputs(data, other, case.seed).items():
        ratio, _ = problem.check_ratio(output, expected)
        (honest if should_pass else null).append((ratio, name))
        if (ratio <= 1.0) != should_pass:
            wrong.append(name)
    synchronize(device)
    return SelftestRow(case, max(honest), min(null), wrong)


def lax_check(problem: Problem, device: DeviceInfo, small: bool) -> str:
    """'' when the check in force tells the task's honest outputs from its null models on the first
    test case (what every run does before it starts); else one line saying which it gets wrong,
    for the run's header: a pass under such a check proves little."""
    case = problem.spec.cases("test", small)[0]
    row = selftest_case(problem, device, case)
    if row.ok:
        return ""
    where = f"test {problem.label(case.args)}"
    null = [n for n in row.wrong if n.startswith("null ")]
    honest = [n for n in row.wrong if n not in null]
    parts = ([f"it passes {len(null)} cheap wrong answer(s) ({', '.join(n[5:] for n in null)})"] if null else []) + \
        ([f"it fails legitimate output(s) ({', '.join(honest)})"] if honest else [])
    return f"check '{problem.check_policy}' on {where}: {'; '.join(parts)}"
