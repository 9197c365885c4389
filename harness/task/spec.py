"""Load and validate task.yml into plain, frozen dataclasses.

The schema *is* the dataclasses below: every field is a key, its annotation is the type, a field
without a default is required. Any mismatch becomes one `SpecError` naming the key path
(e.g. ``task.yml: tests[2].seed: expected int, got str``).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import typing
from pathlib import Path
from typing import Any, Callable

import yaml

MODES = ("test", "benchmark", "leaderboard", "profile")  # what the engine runs for a submission


class SpecError(ValueError):
    """A problem in the task file; the message is one line naming the key."""


@dataclasses.dataclass(frozen=True)
class Case:
    """One call signature: keyword arguments for the task's `generate_input`."""

    args: dict[str, Any]
    index: int
    kind: str  # "test" or "benchmark"

    @property
    def name(self) -> str:
        return "; ".join(f"{k}: {_short(v)}" for k, v in self.args.items())

    @property
    def seed(self) -> int:
        return int(self.args.get("seed", 0))


def _short(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


@dataclasses.dataclass(frozen=True)
class CaseSet:
    tests: list[dict[str, Any]]
    benchmarks: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Timeouts:
    startup: float
    test_case: float
    benchmark_case: float


@dataclasses.dataclass(frozen=True)
class Timing:
    warmup_calls: int
    min_runs: int
    max_runs: int
    max_seconds: float
    target_rel_ci: float


@dataclasses.dataclass(frozen=True)
class Check:
    policy: str                               # the default policy's name
    policies: dict[str, dict[str, float]]     # name -> the task's parameters for it


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    name: str
    description: str
    tests: list[dict[str, Any]]
    benchmarks: list[dict[str, Any]]
    cpu: CaseSet
    check: Check
    ranking: str           # how the leaderboard orders submissions: geom | mean | last (RANKINGS)
    timeouts: Timeouts
    timing: Timing
    dims: dict[str, float] = dataclasses.field(default_factory=dict)          # the task's constants, for readers
    kv_formats: list[str] = dataclasses.field(default_factory=list)  # input variants a submission may read
    precision_contract: list[str] = dataclasses.field(default_factory=list)  # what a legitimate kernel may do
    reference: str = "reference.py"  # the task's code, relative to this file (a task variant can share one)
    # a narrower task (a file relative to this one), e.g. the competition's own cases: a file that
    # fails this task's tests is also tested there, and the report gives that verdict
    companion: str = ""
    # arguments every case hands generate_input unless the case sets its own (a task variant's inputs,
    # e.g. the competition's value distribution; --shape and popcorn's cases get them too)
    case_defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    path: str = ""

    def cases(self, kind: str, small: bool = False) -> list[Case]:
        """The test or benchmark cases; `small` picks the CPU set."""
        source = self.cpu if small else self
        raw = source.tests if kind == "test" else source.benchmarks
        return [Case(args={**self.case_defaults, **args}, index=i, kind=kind) for i, args in enumerate(raw)]


RANKINGS = ("geom", "mean", "last")  # geometric / arithmetic mean of per-case medians, or the last case's


def load_task(path: str | Path, generate_input: Callable[..., Any] | None = None) -> TaskSpec:
    """Read and validate a task file. With `generate_input`, case keys are checked against its
    signature too (unknown or missing arguments are errors)."""
    path = Path(path)
    label = path.name
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"{path}: task file not found") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise SpecError(f"{label}:{where} not valid YAML ({getattr(exc, 'problem', exc)})") from None
    try:
        spec = _build(TaskSpec, raw, "", skip={"path"})
    except SpecError as exc:
        raise SpecError(f"{label}: {exc}") from None
    spec = dataclasses.replace(spec, path=str(path))
    if spec.check.policy not in spec.check.policies:
        raise SpecError(f"{label}: check.policy: {spec.check.policy!r} is not one of check.policies "
                        f"({', '.join(spec.check.policies)})")
    if spec.ranking not in RANKINGS:
        raise SpecError(f"{label}: ranking: must be one of {', '.join(RANKINGS)}, got {spec.ranking!r}")
    if spec.timing.min_runs < 1 or spec.timing.max_runs < spec.timing.min_runs:
        raise SpecError(f"{label}: timing: need 1 <= min_runs <= max_runs")
    _check_values(spec, label)
    for where, cases in (("tests", spec.tests), ("benchmarks", spec.benchmarks),
                         ("cpu.tests", spec.cpu.tests), ("cpu.benchmarks", spec.cpu.benchmarks)):
        if not cases:
            raise SpecError(f"{label}: {where}: must list at least one case")
        for i, case in enumerate(cases):
            check_case({**spec.case_defaults, **case}, f"{label}: {where}[{i}]", generate_input)
    return spec


def _check_values(spec: TaskSpec, label: str) -> None:
    """Values, not only keys: a zero or negative tolerance, timeout or budget is an error here, not
    a check that passes zeros or a division by zero later."""
    for name, params in spec.check.policies.items():
        for key, value in params.items():
            if key == "max_mismatch":  # 0: not one element may be off (the competition's own check)
                if not (math.isfinite(value) and 0 <= value < 1):
                    raise SpecError(f"{label}: check.policies.{name}.{key}: a share of the elements, 0 or more and "
                                    f"below 1, got {value}")
            elif not (math.isfinite(value) and value > 0):
                raise SpecError(f"{label}: check.policies.{name}.{key}: must be a positive number, got {value}")
    for key, value in dataclasses.asdict(spec.timeouts).items():
        if not (math.isfinite(value) and value > 0):
            raise SpecError(f"{label}: timeouts.{key}: must be a positive number of seconds, got {value}")
    timing = spec.timing
    if timing.warmup_calls < 0:
        raise SpecError(f"{label}: timing.warmup_calls: must be 0 or more, got {timing.warmup_calls}")
    if not (math.isfinite(timing.max_seconds) and timing.max_seconds > 0):
        raise SpecError(f"{label}: timing.max_seconds: must be a positive number, got {timing.max_seconds}")
    if not 0 < timing.target_rel_ci < 1:
        raise SpecError(f"{label}: timing.target_rel_ci: must be between 0 and 1, got {timing.target_rel_ci}")


HARNESS_ARGS = ("device",)  # what the harness itself passes to generate_input (harness/task/problem.py)


def check_case(case: dict[str, Any], where: str, generate_input: Callable[..., Any] | None) -> None:
    for key, value in case.items():
        ok = isinstance(value, (int, float, str, bool)) or (
            isinstance(value, list) and all(isinstance(v, (int, float)) for v in value))
        if not ok:
            raise SpecError(f"{where}.{key}: expected a number, string or list of numbers, got {type(value).__name__}")
    if "seed" not in case or type(case["seed"]) is not int:
        raise SpecError(f"{where}.seed: every case needs an integer seed")
    if generate_input is None:
        return
    params = inspect.signature(generate_input).parameters
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    for key in case:
        if key not in params and not accepts_any:
            raise SpecError(f"{where}.{key}: unknown key (generate_input takes {', '.join(params)})")
        if key in HARNESS_ARGS:
            raise SpecError(f"{where}.{key}: set by the harness, not by a case")
    for name, p in params.items():
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name not in case:
            raise SpecError(f"{where}.{name}: missing (generate_input requires it)")
    validate = getattr(generate_input, "__globals__", {}).get("check_case")  # the task's own limits, if it has them
    if callable(validate):
        try:
            validate(**case)
        except (ValueError, TypeError) as exc:
            raise SpecError(f"{where}: {exc}") from None


def _build(cls: type, raw: Any, where: str, skip: frozenset[str] | set[str] = frozenset()) -> Any:
    if not isinstance(raw, dict):
        raise SpecError(f"{where or 'top level'}: expected a mapping, got {_type_name(raw)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in skip}
    for key in raw:
        if key not in fields:
            raise SpecError(f"{_join(where, key)}: unknown key (expected one of {', '.join(fields)})")
    values = {}
    for name, field in fields.items():
        key_path = _join(where, name)
        if name not in raw:
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise SpecError(f"{key_path}: missing")
            continue
        values[name] = _convert(hints[name], raw[name], key_path)
    return cls(**values)


def _convert(hint: Any, value: Any, where: str) -> Any:
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where)
    origin = typing.get_origin(hint)
    if origin is list:
        (item,) = typing.get_args(hint)
        if not isinstance(value, list):
            raise SpecError(f"{where}: expected a list, got {_type_name(value)}")
        return [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        key_type, item = typing.get_args(hint)
        if not isinstance(value, dict):
            raise SpecError(f"{where}: expected a mapping, got {_type_name(value)}")
        return {k: _convert(item, v, _join(where, k)) for k, v in value.items()}
    if hint is Any:
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SpecError(f"{where}: expected a number, got {_type_name(value)}")
        return value  # a number; ints stay ints (num_heads: 16, not 16.0)
    if hint in (int, str, bool):
        if type(value) is not hint:
            raise SpecError(f"{where}: expected {hint.__name__}, got {_type_name(value)}")
        return value
    raise TypeError(f"spec schema uses an unsupported type {hint!r} at {where}")


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else str(key)


def _type_name(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__
