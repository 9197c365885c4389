"""Memory the parent and a sandboxed worker both map, handed over as file descriptors.

Both sides import this module; it only moves bytes and holds no verdict. The parent allocates every
buffer (the case's inputs and one output slot of exactly the expected size), sends each as a file
descriptor over the worker's socket, and the worker maps it. No pickle, no /dev/shm names, no
process IDs: a descriptor passed with SCM_RIGHTS works across the sandbox's namespaces.

* CPU: a memfd, mapped with `torch.UntypedStorage.from_file` through `/proc/self/fd/N`.
* GPU: a driver allocation exportable as a POSIX descriptor (CUDA's virtual memory management API,
  `cuMemCreate` ... `cuMemExportToShareableHandle`; HIP has the same calls with a `hip` prefix),
  mapped into each process and wrapped as a tensor through `__cuda_array_interface__`. Legacy CUDA
  IPC handles are not used: they identify the exporting process, which the sandbox hides.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
from typing import Any, Optional

import torch


class SharedMemoryError(RuntimeError):
    pass


def _extent(shape: tuple[int, ...], stride: tuple[int, ...], offset: int) -> int:
    """Elements of storage a strided view needs (0 for an empty view)."""
    if any(s == 0 for s in shape):
        return 0
    return offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride))


def spec_of(t: torch.Tensor) -> dict[str, Any]:
    """A tensor's layout as plain data (JSON)."""
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "stride": list(t.stride()),
            "offset": int(t.storage_offset())}


def dtype_of(name: str) -> torch.dtype:
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise SharedMemoryError(f"unknown dtype {name!r}")
    return dtype


def nbytes_of(spec: dict[str, Any]) -> int:
    item = torch.empty(0, dtype=dtype_of(spec["dtype"])).element_size()
    return max(1, _extent(tuple(spec["shape"]), tuple(spec["stride"]), int(spec["offset"])) * item)


def view(buffer: "Buffer", spec: dict[str, Any]) -> torch.Tensor:
    """The tensor `spec` describes, over `buffer`'s bytes (no copy)."""
    dtype = dtype_of(spec["dtype"])
    raw = buffer.bytes_tensor()
    item = torch.empty(0, dtype=dtype).element_size()
    usable = raw.numel() // item * item
    flat = raw[:usable].view(dtype)
    return flat.as_strided(tuple(spec["shape"]), tuple(spec["stride"]), int(spec["offset"]))


class Buffer:
    """One shared allocation of `nbytes` on `device` ("cpu" or "cuda")."""

    def __init__(self, nbytes: int, device: str, fd: Optional[int] = None):
        """Allocate (fd None, the parent) or map a descriptor received from the other side."""
        self.nbytes, self.device = int(nbytes), device
        if device == "cpu":
            self._cpu(fd)
        else:
            self._gpu = _GpuMapping(self.nbytes, fd)
            self.fd = self._gpu.fd
            self._tensor = self._gpu.tensor()

    def _cpu(self, fd: Optional[int]) -> None:
        if fd is None:  # sealed at its size: a worker that kept the descriptor cannot shrink it under us (SIGBUS)
            fd = os.memfd_create("mla-eval", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, self.nbytes)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        elif os.fstat(fd).st_size < self.nbytes:
            raise SharedMemoryError("shared buffer is smaller than announced")
        self.fd = fd
        storage = torch.UntypedStorage.from_file(f"/proc/self/fd/{fd}", shared=True, nbytes=self.nbytes)
        self._tensor = torch.empty(0, dtype=torch.uint8).set_(storage)

    def bytes_tensor(self) -> torch.Tensor:
        return self._tensor

    def close_fd(self) -> None:
        """The mapping stays; the descriptor is no longer needed once sent (or imported)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def share(t: torch.Tensor) -> tuple[Buffer, torch.Tensor]:
    """A shared buffer holding a copy of `t` (same layout), and the view of it."""
    spec = spec_of(t)
    buffer = Buffer(nbytes_of(spec), "cpu" if t.device.type == "cpu" else "cuda")
    shared = view(buffer, spec)
    shared.copy_(t)
    return buffer, shared


# -- GPU: the driver's virtual memory management API, through ctypes ---------------------------

class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_PINNED, _POSIX_FD, _LOCATION_DEVICE, _READ_WRITE = 1, 1, 1, 3
_DRIVER: dict[str, Any] = {}


def _driver() -> tuple[Any, str]:
    """(the driver library, its function prefix): CUDA's libcuda or HIP's libamdhip64."""
    if not _DRIVER:
        if torch.version.hip:
            _DRIVER["lib"], _DRIVER["prefix"] = ctypes.CDLL("libamdhip64.so"), "hip"
        else:
            _DRIVER["lib"], _DRIVER["prefix"] = ctypes.CDLL("libcuda.so.1"), "cu"
    return _DRIVER["lib"], _DRIVER["prefix"]


def driver_call(name: str, *args: Any) -> None:
    lib, prefix = _driver()
    fn = getattr(lib, prefix + name)
    code = fn(*args)
    if code != 0:
        raise SharedMemoryError(f"{prefix}{name} failed with error {code}")


_CALL_STREAM: dict[str, Any] = {}


def call_stream() -> "torch.cuda.Stream":
    """The stream a fenced worker's calls (harness/worker/loop.py) and the fence's null calls run on:
    a blocking stream of its own (cuStreamCreate, flags 0), made once. Not the legacy default stream:
    kernels there run ~1 µs slower each while another process's stream waits on a flag (the
    parent's DONE), which no CUPTI trace of the same call shows (H100 under MPS, BENCHMARKS.md).
    Blocking, so work a submission launches on the legacy default stream (a raw extension's
    `<<<...>>>`) is ordered with it by CUDA's legacy-stream rules (not measured under the fence),
    and pays that stream's cost."""
    if "stream" not in _CALL_STREAM:
        handle = ctypes.c_void_p()
        driver_call("StreamCreate", ctypes.byref(handle), 0)
        _CALL_STREAM["stream"] = torch.cuda.ExternalStream(handle.value)
    return _CALL_STREAM["stream"]


class _GpuMapping:
    def __init__(self, nbytes: int, fd: Optional[int]):
        torch.empty(1, device="cuda")  # an allocation, no kernel: the primary context is current from here on
        device = torch.cuda.current_device()
        prop = _AllocationProp(type=_PINNED, requestedHandleTypes=_POSIX_FD, location=_Location(_LOCATION_DEVICE, device))
        granularity = ctypes.c_size_t()
        driver_call("MemGetAllocationGranularity", ctypes.byref(granularity), ctypes.byref(prop), 0)
        g = granularity.value
        self.size = max(g, (nbytes + g - 1) // g * g)
        handle = ctypes.c_ulonglong()
        if fd is None:
            driver_call("MemCreate", ctypes.byref(handle), ctypes.c_size_t(self.size), ctypes.byref(prop), ctypes.c_ulonglong(0))
            out = ctypes.c_int()
            driver_call("MemExportToShareableHandle", ctypes.byref(out), handle, _POSIX_FD, ctypes.c_ulonglong(0))
            fd = out.value
        else:
            driver_call("MemImportFromShareableHandle", ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD)
        self.fd = fd
        ptr = ctypes.c_ulonglong()
        driver_call("MemAddressReserve", ctypes.byref(ptr), ctypes.c_size_t(self.size), ctypes.c_size_t(0),
              ctypes.c_ulonglong(0), ctypes.c_ulonglong(0))
        driver_call("MemMap", ptr, ctypes.c_size_t(self.size), ctypes.c_size_t(0), handle, ctypes.c_ulonglong(0))
        access = _AccessDesc(_Location(_LOCATION_DEVICE, device), _READ_WRITE)
        driver_call("MemSetAccess", ptr, ctypes.c_size_t(self.size), ctypes.byref(access), ctypes.c_size_t(1))
        driver_call("MemRelease", handle)  # the mapping keeps the memory alive until it is unmapped
        self.ptr, self.nbytes = ptr.value, nbytes

    def tensor(self) -> torch.Tensor:
        return torch.as_tensor(_ArrayInterface(self), device="cuda")

    def __del__(self) -> None:
        try:
            torch.cuda.synchronize()
            driver_call("MemUnmap", ctypes.c_ulonglong(self.ptr), ctypes.c_size_t(self.size))
            driver_call("MemAddressFree", ctypes.c_ulonglong(self.ptr), ctypes.c_size_t(self.size))
        except Exception:  # interpreter shutdown: the process's mappings go with it
            pass


class _ArrayInterface:
    """Exposes a mapping to torch without copying; the tensor keeps this object (and so the
    mapping) alive."""

    def __init__(self, mapping: _GpuMapping):
        self.mapping = mapping
        self.__cuda_array_interface__ = {"shape": (mapping.nbytes,), "typestr": "|u1",
                                         "data": (mapping.ptr, False), "version": 2, "strides": None}


# -- a data tree (tuples, lists, dicts, scalars, tensors) as JSON plus buffers -----------------

def describe(tree: Any, tensors: list[torch.Tensor]) -> Any:
    """`tree` as JSON-able data; its tensors are appended to `tensors` and named by index."""
    if isinstance(tree, torch.Tensor):
        tensors.append(tree)
        return {"tensor": len(tensors) - 1, **spec_of(tree)}
    if isinstance(tree, tuple):
        return {"tuple": [describe(x, tensors) for x in tree]}
    if isinstance(tree, list):
        return {"list": [describe(x, tensors) for x in tree]}
    if isinstance(tree, dict):
        return {"dict": [[str(k), describe(v, tensors)] for k, v in tree.items()]}
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    raise SharedMemoryError(f"cannot share a {type(tree).__name__}")


def rebuild(desc: Any, buffers: list[Buffer]) -> Any:
    """The tree `describe` described, its tensors viewing `buffers` (one per tensor, in order)."""
    if isinstance(desc, dict):
        if "tensor" in desc:
            return view(buffers[int(desc["tensor"])], desc)
        if "tuple" in desc:
            return tuple(rebuild(x, buffers) for x in desc["tuple"])
        if "list" in desc:
            return [rebuild(x, buffers) for x in desc["list"]]
        if "dict" in desc:
            return {k: rebuild(v, buffers) for k, v in desc["dict"]}
        raise SharedMemoryError("malformed tree")
    return desc


# -- flags both processes' GPU streams wait on and write (the parent's fence, harness/parent/fence.py) --

GATE, DONE = 0, 4  # byte offsets of the two 32-bit flags in a fence buffer
_WAIT_GEQ = 0x0


class StreamFlags:
    """Two 32-bit flags in a shared GPU buffer that streams of either process wait on and write
    (`cuStreamWaitValue32` / `cuStreamWriteValue32`: the GPU's front end does both, no kernel runs):
    the parent writes GATE when a call's inputs are in place, the worker's stream waits for it before
    the call and writes DONE after the output. Under MPS the two processes' streams share one
    hardware context, so a flag written by one releases the other within microseconds."""

    def __init__(self, buffer: Buffer):
        if buffer.device != "cuda" or torch.version.hip:
            raise SharedMemoryError("stream flags need an NVIDIA GPU")
        lib, _ = _driver()
        self._wait = getattr(lib, "cuStreamWaitValue32_v2", None) or lib.cuStreamWaitValue32
        self._write = getattr(lib, "cuStreamWriteValue32_v2", None) or lib.cuStreamWriteValue32
        for fn in (self._wait, self._write):
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        self.buffer = buffer
        self.base = buffer.bytes_tensor().data_ptr()

    def wait(self, stream: "torch.cuda.Stream", flag: int, value: int) -> None:
        """`stream` waits until the flag is at least `value`."""
        code = self._wait(ctypes.c_void_p(stream.cuda_stream), self.base + flag, value, _WAIT_GEQ)
        if code != 0:
            raise SharedMemoryError(f"cuStreamWaitValue32 failed with error {code}")

    def write(self, stream: "torch.cuda.Stream", flag: int, value: int) -> None:
        """`stream` sets the flag to `value` when it gets there."""
        code = self._write(ctypes.c_void_p(stream.cuda_stream), self.base + flag, value, 0)
        if code != 0:
            raise SharedMemoryError(f"cuStreamWriteValue32 failed with error {code}")
