"""The submission's launches recorded: `Recorder` replaces Triton's launch entry point and keeps one
record per distinct specialization (what Triton specializes a compiled kernel on: argument types and
alignment, constexpr values, launch options), each argument described so that compiler.py can
rebuild it for any target; `_capture` runs the task's small test cases through the file, on the CPU
under Triton's interpreter or as on a target's GPU (FakeTensor inputs on "cuda", each launch
recorded instead of run)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any, Optional

from harness.compile.targets import TargetDevice, on_device


def _int_class(value: int) -> str:
    """What Triton specializes a compiled kernel on for an integer argument: the value 1 (a
    constant), the width (i32 / i64 / u64) and whether 16 divides it."""
    if value == 1:
        return "one"
    width = "i32" if -2**31 <= value < 2**31 else "u64" if value >= 2**63 else "i64"
    return width + ("/16" if value % 16 == 0 else "")


def _constant(value: Any) -> Any:
    """A constexpr value as JSON: numbers, strings, None; {"dtype": name}, {"tuple": [...]},
    {"jit": "module:name"} for a Triton function; {"unsupported": type} otherwise."""
    value = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if type(value).__name__ == "dtype" and hasattr(value, "name"):
        return {"dtype": value.name}
    if isinstance(value, (tuple, list)):
        return {"tuple": [_constant(v) for v in value]}
    fn = getattr(value, "fn", None)
    if callable(fn):
        return {"jit": f"{fn.__module__}:{fn.__qualname__}"}
    return {"unsupported": type(value).__name__}


def _aligned(value: Any, tensor: Any) -> bool:
    """Whether a tensor argument's address is a multiple of 16. A FakeTensor (a target process's
    stand-in for device memory) has no address: there, whether its offset into its storage is (GPU
    allocators align every allocation to 256 bytes or more)."""
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(tensor, FakeTensor):
        return tensor.storage_offset() * tensor.element_size() % 16 == 0
    return value.data_ptr() % 16 == 0


def _argument(value: Any) -> tuple[Any, Any]:
    """(how to rebuild a runtime argument for any target, its specialization key)."""
    import torch

    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):  # a tensor, or triton.reinterpret's wrapper
        dtype = value.dtype
        name = str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else {"tl": dtype.name}
        tensor = value if isinstance(value, torch.Tensor) else getattr(value, "base", value)
        try:
            size = int(tensor.untyped_storage().nbytes())
        except Exception:
            size = 0
        described = {"tensor": name, "aligned": _aligned(value, tensor), "bytes": size}
        return described, ["tensor", name, described["aligned"], size < 2**31]
    if isinstance(value, bool):
        return {"bool": value}, ["bool"]
    if isinstance(value, int):
        return {"int": value}, ["int", _int_class(value)]
    if isinstance(value, float):
        return {"float": value}, ["float"]
    if value is None:
        return {"none": True}, ["none"]
    if isinstance(value, tuple):
        parts = [_argument(v) for v in value]
        return {"tuple": [p[0] for p in parts]}, ["tuple", [p[1] for p in parts]]
    return {"unsupported": type(value).__name__}, ["unsupported", type(value).__name__]


class Recorder:
    """Replaces Triton's launch entry point and keeps one record per distinct specialization. Under
    the interpreter each launch is recorded, then run; in a target process (no GPU) it is recorded
    only: the launch returns None, and the kernel's outputs stay as the file allocated them. An
    autotuned kernel's configurations are all recorded (as warm-up launches) instead of timed, which
    needs a GPU; the first one is then launched."""

    def __init__(self):
        self.launches: dict[str, dict] = {}
        self.case = ""

    def install(self, execute: bool = True) -> None:
        from triton.runtime.autotuner import Autotuner

        recorder = self
        if execute:
            from triton.runtime.interpreter import InterpretedFunction

            original = InterpretedFunction.run

            def run(self, *args, grid, warmup, **kwargs):
                recorder.record(self.fn, args, kwargs, launched=not warmup)
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)

            InterpretedFunction.run = run
        else:
            from triton.runtime.jit import JITFunction

            def record_only(self, *args, grid, warmup, **kwargs):
                recorder.record(self.fn, args, kwargs, launched=not warmup)

            JITFunction.run = record_only

        def bench(self, *args, config, **meta):
            self.fn.run(*args, **{**meta, "warmup": True}, **config.all_kwargs())
            return [float(self.configs.index(config))]  # "fastest" = the first configuration

        Autotuner._bench = bench

    def record(self, fn: Any, args: tuple, kwargs: dict, launched: bool = True) -> None:
        from triton.runtime.jit import _normalize_ty

        params = list(inspect.signature(fn).parameters)
        constexpr = {name for name, ty in inspect.get_annotations(fn).items() if _normalize_ty(ty) == "constexpr"}
        given = dict(zip(params, args))
        given.update({k: v for k, v in kwargs.items() if k in params})
        described, key = {}, []
        for name, value in given.items():
            if name in constexpr:
                described[name] = {"constexpr": _constant(value)}
                key.append([name, described[name]])
            else:
                described[name], part = _argument(value)
                key.append([name, part])
        options = {k: _constant(v) for k, v in kwargs.items() if k not in params}
        ident = json.dumps([fn.__module__, fn.__qualname__, key, options], sort_keys=True, default=str)
        entry = self.launches.setdefault(ident, {"module": fn.__module__, "kernel": fn.__qualname__,
                                                 "args": described, "options": options, "launches": 0, "cases": []})
        entry["launches"] += launched
        if self.case and self.case not in entry["cases"]:
            entry["cases"].append(self.case)


def _capture(submission: str, task: str, cases: Optional[int],
             device: Optional[TargetDevice] = None) -> tuple[list[dict], Optional[str], Optional[str]]:
    """Every distinct launch of the task's small test cases: on the CPU under the interpreter, or
    with `device` (installed by install_device before this) as a run on it launches them, the
    inputs on "cuda" (on_device). Returns (launches, the one-line reason the CPU run stopped early,
    the one-line reason the file cannot be planned as on `device`); None where there is none."""
    import torch

    from harness.worker import compat
    from harness.worker.channel import one_line
    from harness.task.problem import load_problem
    from harness.worker.loop import _load, _LoadError

    recorder = Recorder()
    recorder.install(execute=device is None)
    problem = load_problem(task)
    compat.install()
    try:
        kernel = _load(submission)
    except _LoadError as exc:
        if device is not None:
            return [], None, f"importing it as on {device.name} failed: {exc.kind}: {exc}"
        return [], f"loading {Path(submission).name}: {exc.kind}: {exc}", None
    if device is not None:
        import warnings

        from torch._subclasses.fake_tensor import FakeTensorMode

        # (a file that keys a cache on data_ptr() gets the storage offset, with a deprecation warning)
        warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor")
    for case in problem.spec.cases("test", small=True)[:cases]:
        recorder.case = problem.label(case.args)
        data = problem.generate(case.args, case.seed, torch.device("cpu"))
        try:
            if device is None:
                kernel(data)
                continue
            with FakeTensorMode(allow_non_fake_inputs=True):
                kernel(on_device(data))
        except BaseException as exc:  # the submission's fault, or what a GPU-less process lacks
            if device is not None:
                return [], None, f"custom_kernel raised on case {recorder.case} as on {device.name}: {one_line(exc)}"
            stopped = f"custom_kernel raised on case {recorder.case}: {one_line(exc)}"
            return list(recorder.launches.values()), stopped, None
    return list(recorder.launches.values()), None, None
