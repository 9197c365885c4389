"""Cross-compile report (`--mode compile`): the Triton kernels a submission would launch on each AMD
(and NVIDIA) target, compiled offline for it, with what they cost there, on a machine without that GPU.

    python -m harness.compile --submission FILE [--target gfx950 --target gfx942] [--task task.yml]

The kernels are planned as a run on the target plans them. A file picks its variant at run time from
what PyTorch says about the GPU (torch.version.hip, torch.cuda.get_device_properties: gcnArchName,
multi_processor_count; get_device_capability) and from its tensors' device; for each target, a
process of its own makes torch report that target's GPU (TARGET_DEVICES: MI355X for gfx950, ...),
hands the file the task's small test cases as tensors on "cuda" (PyTorch's FakeTensor: shapes,
dtypes, strides and storage offsets, no values) and records each launch instead of running it; the
file's own code decides everything on the way, exactly as on that GPU. Where that cannot work (the
file reads tensor values on the host, or no device is known for the target) the target's kernels
are those the file launches on the CPU in Triton's interpreter, and the report says so and why.

Processes; the submission is untrusted code, so every one that runs it is inside the OS sandbox
(harness/parent/launch.py's `bwrap_command`, as for a worker):
  * the parent (run.py, `cross_compile_report`): starts the sandboxed child and reads its JSON report
    strictly (size cap, every field's type checked); it never imports the submission;
  * the child (capture.py, `--child`): starts one target process per target with a known GPU (at
    most as many at a time as there are CPU cores); for the targets whose launches cannot be planned
    that way, it captures the launches on the CPU under Triton's interpreter itself and starts the
    compile process for them;
  * a target process (capture.py, `--target-stage`): the target's GPU as above, the launches
    recorded (deduplicated by what Triton specializes a compiled kernel on: argument types and
    alignment, constexpr values, launch options), then each rebuilt exactly as a launch there would
    bind it (Triton's own argument binder and option parser for that target's backend), compiled
    offline, and the compiler's numbers read: registers, spills, LDS / shared memory, the matrix
    instructions in the assembly;
  * the compile process (capture.py, `--compile-stage`): the same compiling, for launches captured
    on the CPU.

This is a diagnostic: nothing is ranked on it, and a submission can forge what its own processes
report. `--set NAME=VALUE` (a constexpr) and `--option NAME=VALUE` (a launch option) change the
recorded launches before compiling, to see what another setting would cost. Shapes matter: the
task's small cases may not reach a file's long-sequence settings. Input dtypes are the task's on the
CPU (its fp8 is OCP e4m3 for every target).

The modules:
  targets    a target's name parsed, what it allows, the GPU a run on it sees, the named messages;
  run        the parent: `cross_compile_report`, and the command line (`main`; `python -m harness.compile`);
  report     the child's rows read strictly (`read_report`) and shown (`CompileReport`, `show_report`,
             `report_markdown`);
  capture    the child and the processes it starts (`python -m harness.compile.capture`);
  record     the submission's launches recorded (`Recorder`) on the task's small cases;
  compiler   each recorded launch rebuilt and compiled for a target, as a report row;
  assembly   the compiler's numbers, read from its output (pure functions).

This file imports nothing: the child runs from this package too, and its sandbox holds only the
harness modules the child's entry file imports (harness/parent/allowlist.py), so the parent's side (run.py,
report.py, harness/parent/launch.py) stays out of it. Import each name from its module."""
