"""The harness's public entry points for programs outside it: the device experiments in lab/, and
anyone scripting the harness. Import from here, not from the modules behind it: those are internal
and move when the harness is reorganised; a name here keeps its meaning, and tests/test_layout.py
imports every lab/ script, so a change that breaks one fails the test suite.

What each name is:
  main                  the command line (`eval.py`): main(argv) -> exit code
  load_problem, load_task, SpecError, tensors
                        a task (task.yml + reference.py), its spec, and the tensors of an input tree
  detect, measure_copy_bandwidth
                        the device the harness would use, and its measured copy bandwidth
  load_module, CallTimer, capture_graph
                        a submission loaded the worker's way, the worker's own timer, a CUDA graph of one call
  clone_tree, dequantize_mxfp4
                        a deep copy of an input tree; an mxfp4 KV cache as float32
  Store, write_page     the results database, and the HTML leaderboard page
  start_worker, bwrap_command, child_env, find_bwrap, allowed_paths
                        a sandboxed worker, and the pieces of its sandbox
  find_ncu, ncu_command, kernel_times
                        Nsight Compute as the audit runs it
  Buffer, driver_call, Census
                        GPU memory shared across processes, a CUDA driver call, the census kernel
  fence, launch, mps, watcher, compat, Recorder
                        the parent's fence, the worker launcher, the run's MPS daemon, the fence's DONE
                        watcher, the competition compatibility shim, and --mode compile's launch
                        recorder (modules and classes lab/ experiments patch or drive)
"""

from harness.cli import main
from harness.compile.record import Recorder
from harness.device import detect, measure_copy_bandwidth
from harness.parent import fence, launch, mps, watcher
from harness.parent.allowlist import allowed_paths
from harness.parent.audit import find_ncu, kernel_times, ncu_command
from harness.parent.case import clone_tree
from harness.parent.census import Census
from harness.parent.launch import bwrap_command, child_env, find_bwrap, start_worker
from harness.report.html_report import write_page
from harness.report.store import Store
from harness.task.problem import load_problem
from harness.task.quant import dequantize_mxfp4
from harness.task.spec import SpecError, load_task
from harness.task.verdict import tensors
from harness.worker import compat
from harness.worker.loop import load_module
from harness.worker.shared_memory import Buffer, driver_call
from harness.worker.timer import CallTimer, capture_graph

__all__ = ["allowed_paths", "Buffer", "bwrap_command", "CallTimer", "capture_graph", "Census", "child_env",
           "clone_tree", "compat", "dequantize_mxfp4", "detect", "driver_call", "fence", "find_bwrap",
           "find_ncu", "kernel_times", "launch", "load_module", "load_problem", "load_task", "main",
           "measure_copy_bandwidth", "mps", "ncu_command", "Recorder", "SpecError", "start_worker", "Store",
           "tensors", "watcher", "write_page"]
