"""Can the parent read a worker's output where the worker computed it? (issue 37: a worker that writes
DONE before its output's copy into the slot hides that copy in the parent's wake-up, docs/threat-model.md
"Still open" (3); the planned fix has the parent copy the output itself, straight from the worker's
memory, so that no copy is left for a worker to hide.)

A child process (the worker's stand-in) makes an output the way a submission does (a tensor from
PyTorch's caching allocator, 4x16x512 bf16 unless --bytes), exports the allocation that holds it with
CUDA's IPC (`cuIpcGetMemHandle` of the allocation's base, `cuMemGetAddressRange`) and prints the handle
and the output's offset; the parent opens it (`cuIpcOpenMemHandle`, timed), copies the output out of
it on a stream of its own `--calls` times (`cuMemcpyDtoDAsync`, CUDA events around each) beside the
same copy from memory of its own, and checks the bytes. With --bwrap the child runs in new PID and IPC
namespaces (bubblewrap, as the sandboxed worker does); with --expandable its allocator uses expandable
segments (virtual memory: legacy IPC cannot export it, so the child exports the page that holds the
output as a descriptor instead, `cuMemRetainAllocationHandle` + `cuMemExportToShareableHandle`, and
passes it over a Unix socket (SCM_RIGHTS, as the harness's shared memory crosses the sandbox); the
parent imports and maps it as harness/worker/shared_memory.py maps a slot, a page of PyTorch's size
for the output's pool: 2 MiB up to 1 MiB, else 20 MiB).
Run it as an MPS client too (CUDA_MPS_PIPE_DIRECTORY set, a daemon running), as the fence's processes are.

Usage (GPU machine, repo root):
    python3 lab/ipc_probe.py [--bwrap] [--expandable] [--calls 50] [--bytes N]
Prints what each step found, and a last line: opened or not, the open's cost, the copy's median
from the child's memory against from the parent's own.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class HANDLE(ctypes.Structure):  # CUipcMemHandle: 64 bytes, passed by value
    _fields_ = [("reserved", ctypes.c_char * 64)]


_POSIX_FD = 1                 # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_LAZY_PEER = 1                # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS


def _lib():
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), HANDLE, ctypes.c_uint]
    lib.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                            ctypes.c_uint64]
    lib.cuMemcpyDtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
    return lib


def _page(nbytes: int) -> int:
    """The page of PyTorch's expandable segments that an allocation of `nbytes` comes from."""
    return 2 << 20 if nbytes <= 1 << 20 else 20 << 20


def child(nbytes: int, sock: "socket.socket | None") -> int:
    """The worker's stand-in: one output, its handle on stdout (an expandable segment's page as a
    descriptor on `sock`), alive until stdin closes."""
    import torch

    lib = _lib()
    out = torch.arange(nbytes // 2, device="cuda").to(torch.bfloat16)  # (wraps: a pattern, not values)
    torch.cuda.synchronize()
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    code = lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), out.data_ptr())
    report = {"offset": out.data_ptr() - base.value, "allocation": size.value, "range_code": code,
              "checksum": int(out.view(torch.int16).to(torch.int64).sum().item())}
    handle = HANDLE()
    report["ipc_code"] = lib.cuIpcGetMemHandle(ctypes.byref(handle), ctypes.c_uint64(base.value))
    report["handle"] = ctypes.string_at(ctypes.addressof(handle), 64).hex()
    if report["ipc_code"] != 0:  # virtual memory (expandable segments): the descriptor export instead
        generic, fd = ctypes.c_uint64(), ctypes.c_int(-1)
        report["retain_code"] = lib.cuMemRetainAllocationHandle(ctypes.byref(generic), ctypes.c_void_p(out.data_ptr()))
        report["export_code"] = lib.cuMemExportToShareableHandle(ctypes.byref(fd), generic, _POSIX_FD,
                                                                 ctypes.c_ulonglong(0))
        report["page_offset"] = (out.data_ptr() - base.value) % _page(nbytes)  # (base: the range's start)
        if report["export_code"] == 0 and sock is not None:
            socket.send_fds(sock, [b"fd"], [fd.value])
    print(json.dumps(report), flush=True)
    sys.stdin.read()  # the parent is done with it
    return 0


def _copy_times(lib, stream, dst: int, src: int, nbytes: int, calls: int) -> list[float]:
    import torch

    times = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            torch.cuda._sleep(200_000)  # the copy queues behind it, so no launch gap is timed
            start.record()
            code = lib.cuMemcpyDtoDAsync_v2(dst, src, nbytes, ctypes.c_void_p(stream.cuda_stream))
            end.record()
        if code != 0:
            raise RuntimeError(f"cuMemcpyDtoDAsync failed with error {code}")
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return times


def _descriptor(sock: socket.socket, report: dict, args: argparse.Namespace) -> int:
    """The parent's side of --expandable: the page's descriptor from the socket, imported and mapped
    (the harness's own mapping code), the output copied out of it and checked."""
    sys.path.insert(0, str(ROOT))
    from harness.api import Buffer

    _, fds, _, _ = socket.recv_fds(sock, 16, 1)
    if not fds:
        print("opened: no (no descriptor came)")
        return 1
    begin = time.perf_counter()
    try:
        page = Buffer(_page(args.bytes), "cuda", fds[0])
    except RuntimeError as e:
        print(f"opened: no (descriptor import: {e})")
        return 1
    open_us = (time.perf_counter() - begin) * 1e6
    nbytes, src = args.bytes, page.bytes_tensor().data_ptr() + report["page_offset"]
    theirs, ours, checksum = _measure(_lib(), src, nbytes, args.calls)
    _result(open_us, checksum == report["checksum"], nbytes, theirs, ours, args)
    return 0


def _measure(lib, src: int, nbytes: int, calls: int) -> tuple[list, list, int]:
    """(the copy's times from `src`, the same copy's from the parent's own memory, the copied bytes'
    checksum as the child computes it)."""
    import torch

    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    own = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.Stream()
    theirs = _copy_times(lib, stream, dst.data_ptr(), src, nbytes, calls)
    ours = _copy_times(lib, stream, own.data_ptr(), dst.data_ptr(), nbytes, calls)
    return theirs, ours, int(dst.view(torch.int16).to(torch.int64).sum().item())


def _result(open_us: float, same: bool, nbytes: int, theirs: list, ours: list, args: argparse.Namespace) -> None:
    print(f"opened: yes in {open_us:.0f} µs; {'bytes match' if same else 'BYTES DIFFER'}; copy of {nbytes} B "
          f"from the child's memory {statistics.median(theirs):.2f} µs, from the parent's own "
          f"{statistics.median(ours):.2f} µs (medians of {args.calls}; bwrap {args.bwrap}, expandable "
          f"{args.expandable}, MPS {'on' if os.environ.get('CUDA_MPS_PIPE_DIRECTORY') else 'off'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bwrap", action="store_true")
    parser.add_argument("--expandable", action="store_true")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--bytes", type=int, default=4 * 16 * 512 * 2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        fd = os.environ.get("PROBE_SOCKET_FD")
        return child(args.bytes, socket.socket(fileno=int(fd)) if fd else None)
    import torch

    lib = _lib()
    torch.empty(1, device="cuda")  # this process's context, before the child's handle is opened
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--bytes", str(args.bytes)]
    if args.bwrap:
        sys.path.insert(0, str(ROOT))
        from harness.api import find_bwrap

        bwrap = find_bwrap()
        if bwrap is None:
            print("no bwrap on PATH")
            return 2
        # (a new /proc with the new PID namespace, as the worker's sandbox has: without it CUDA cannot start)
        command = [bwrap, "--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--unshare-ipc",
                   "--die-with-parent", "--"] + command
    env = dict(os.environ, **({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"} if args.expandable else {}))
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env["PROBE_SOCKET_FD"] = str(theirs.fileno())
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                            pass_fds=[theirs.fileno()])
    theirs.close()
    try:
        line = proc.stdout.readline()
        if not line:
            print(f"the child printed nothing (exit {proc.wait()})")
            return 1
        report = json.loads(line)
        print("child:", {k: v for k, v in report.items() if k != "handle"})
        if report["ipc_code"] != 0:
            if report.get("export_code") != 0:
                print(f"opened: no (cuIpcGetMemHandle error {report['ipc_code']}; descriptor export error "
                      f"{report.get('export_code')})")
                return 1
            return _descriptor(ours, report, args)
        mapped = ctypes.c_uint64()
        begin = time.perf_counter()
        code = lib.cuIpcOpenMemHandle_v2(ctypes.byref(mapped), HANDLE.from_buffer_copy(bytes.fromhex(report["handle"])),
                                         _LAZY_PEER)
        open_us = (time.perf_counter() - begin) * 1e6
        if code != 0:
            print(f"opened: no (cuIpcOpenMemHandle error {code})")
            return 1
        nbytes = args.bytes
        theirs, ours, checksum = _measure(lib, mapped.value + report["offset"], nbytes, args.calls)
        lib.cuIpcCloseMemHandle(ctypes.c_uint64(mapped.value))
        _result(open_us, checksum == report["checksum"], nbytes, theirs, ours, args)
        return 0
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
