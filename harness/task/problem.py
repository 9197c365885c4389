"""A task = its spec (task.yml) + its code (reference.py next to it).

The engine knows nothing about MLA; it talks to the task's reference module through this small
interface:

    generate_input(**case_args, device=...) -> data           # the tuple submissions receive
    reference_outputs(data) -> expected                        # whatever check_output needs
    check_output(output, expected, policy, params) -> (ok, message)
    check_ratio(output, expected, policy, params) -> (error / limit, text)   # below 1 passes
    selftest_outputs(data, other_data, seed) -> {name: (output, should_pass)}
    output_layout(data) -> (shape, dtype)                      # what a right answer looks like
    case_label(args) -> str                                    # optional: a short column title
    bytes_moved(data) -> {kv_format: bytes}                    # optional: least traffic per format
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

import torch

from harness.task.spec import SpecError, TaskSpec, load_task

REQUIRED = ("generate_input", "reference_outputs", "check_output", "check_ratio", "output_layout",
            "selftest_outputs")


@dataclasses.dataclass(frozen=True)
class Problem:
    spec: TaskSpec
    reference: ModuleType
    policy: str = ""  # the check policy in force; "" means task.yml's default

    @property
    def check_policy(self) -> str:
        return self.policy or self.spec.check.policy

    def generate(self, args: dict[str, Any], seed: int, device: torch.device) -> Any:
        return self.reference.generate_input(**{**args, "seed": seed}, device=str(device))

    def expected(self, data: Any) -> Any:
        return self.reference.reference_outputs(data)

    def check(self, output: torch.Tensor, expected: Any) -> tuple[bool, str]:
        policy = self.check_policy
        return self.reference.check_output(output, expected, policy, self.spec.check.policies[policy])

    def check_ratio(self, output: torch.Tensor, expected: Any) -> tuple[float, str]:
        policy = self.check_policy
        return self.reference.check_ratio(output, expected, policy, self.spec.check.policies[policy])

    def label(self, args: dict[str, Any]) -> str:
        """A short column title for a case (the task's `case_label` if it has one)."""
        custom = getattr(self.reference, "case_label", None)
        if callable(custom):
            return custom(args)
        return ",".join(str(v) for k, v in args.items() if k != "seed" and not isinstance(v, list))

    def bytes_moved(self, data: Any) -> dict[str, int]:
        """Least bytes a kernel must move for `data`, per input variant (the task's optional
        `bytes_moved`; empty if it has none)."""
        fn = getattr(self.reference, "bytes_moved", None)
        return dict(fn(data)) if callable(fn) else {}

    def min_bytes(self, data: Any) -> Optional[int]:
        """The fewest bytes any legitimate kernel must move for `data`, or None if unknown."""
        return min(self.bytes_moved(data).values(), default=None)

    def layout(self, data: Any) -> tuple[tuple[int, ...], torch.dtype]:
        return self.reference.output_layout(data)


def configured(problem: Problem, policy: Optional[str] = None, max_seconds: Optional[float] = None,
               timeout: Optional[float] = None) -> Problem:
    """`problem` with a check policy, a time budget per benchmark case and a cap on its timeouts
    chosen at run time."""
    if policy:
        if policy not in problem.spec.check.policies:
            raise SpecError(f"unknown check policy {policy!r}: task.yml defines "
                            f"{', '.join(problem.spec.check.policies)}")
        problem = dataclasses.replace(problem, policy=policy)
    if max_seconds is not None:
        if not 0 < max_seconds < float("inf"):
            raise SpecError("--budget must be a positive, finite number of seconds")
        timing = dataclasses.replace(problem.spec.timing, max_seconds=max_seconds)
        problem = dataclasses.replace(problem, spec=dataclasses.replace(problem.spec, timing=timing))
    if timeout is not None:
        if not timeout > 0:
            raise SpecError("--timeout must be a positive number of seconds")
        limits = {k: min(v, timeout) for k, v in dataclasses.asdict(problem.spec.timeouts).items()}
        timeouts = dataclasses.replace(problem.spec.timeouts, **limits)
        problem = dataclasses.replace(problem, spec=dataclasses.replace(problem.spec, timeouts=timeouts))
    return problem


def load_problem(task_path: str | Path) -> Problem:
    """Load task.yml and its reference.py (beside it, or where its `reference` key says), validating both."""
    task_path = Path(task_path).resolve()
    ref_path = reference_path(task_path)
    if not ref_path.exists():
        raise SpecError(f"{ref_path}: the task's reference.py is missing")
    reference = sys.modules.get("reference")
    if reference is None or Path(getattr(reference, "__file__", "")).resolve() != ref_path:
        spec = importlib.util.spec_from_file_location("reference", ref_path)
        reference = importlib.util.module_from_spec(spec)
        sys.modules["reference"] = reference
        spec.loader.exec_module(reference)
    missing = [name for name in REQUIRED if not callable(getattr(reference, name, None))]
    if missing:
        raise SpecError(f"{ref_path}: missing function(s) {', '.join(missing)}")
    return Problem(load_task(task_path, reference.generate_input), reference)


def reference_path(task_path: str | Path) -> Path:
    """Where a task file's reference.py is (beside it, or where its `reference` key says)."""
    task_path = Path(task_path).resolve()
    return (task_path.parent / _reference_name(task_path)).resolve()


def _reference_name(task_path: Path) -> str:
    """The task file's `reference` entry (validated with the rest by load_task), read first because
    the reference's generate_input checks the cases."""
    import yaml

    try:
        raw = yaml.safe_load(task_path.read_text())
    except (OSError, yaml.YAMLError):
        return "reference.py"  # load_task reports it
    name = raw.get("reference", "reference.py") if isinstance(raw, dict) else "reference.py"
    return name if isinstance(name, str) else "reference.py"
