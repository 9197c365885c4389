"""The folders draw the trust boundary, and the import graph keeps its shape:

  harness/worker/   the sandboxed side: everything that runs a submission's code (the worker, the
                    profiled child) and the wire's ends it shares with the parent
  harness/compile/  --mode compile: its child (capture.py) runs submission code in the sandbox too
  harness/parent/   the trusted parent: evaluates a file without running it (engine, fence, audit...)
  harness/task/     the public task API a task's reference.py may use (spec, problem, verdict, quant)
  harness/report/   what reads results: tables, exports, database, page, plots
  harness/cli/      the command line: argv -> one frozen configuration -> a run -> an exit code
  harness/*.py      what every side reads: the results model (results, timing, ties), the one run
                    configuration (config), the device; and api, the entry points for lab/

No import goes from the sandboxed side to the parent's, from the parent or the task to the report
or the command line, from the task to anything but itself and the device, or from the report to
the engine; no circle; the results need no torch."""

import ast
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

HARNESS = ROOT / "harness"
TOP_LEVEL = {"__init__", "api", "config", "results", "timing", "ties", "device"}
FOLDERS = {"worker", "compile", "parent", "task", "report", "cli"}
# The processes that run a submission's code: their entry files, and every harness module they
# import (followed) stay off the parent's side. The worker's own loop imports only the worker side.
CHILD_ENTRIES = ("harness/worker/__main__.py", "harness/worker/profiled.py", "harness/compile/capture.py")
TRUSTED = ("harness.parent", "harness.cli", "harness.report", "harness.api")


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def harness_imports(path: Path) -> set[str]:
    """The harness modules a file imports (`from harness.p import x` counts as harness.p.x where x
    is a module of package p, else as harness.p)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "harness":
            subs = {f"{node.module}.{a.name}" for a in node.names}
            modules = {m for m in subs if _is_module(m)}
            found |= modules | ({node.module} if len(modules) < len(subs) else set())
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("harness")}
    return found


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _reached(entry: Path) -> set[str]:
    """`entry`'s harness imports, followed through each other (lazy ones included)."""
    graph, seen, todo = import_graph(), set(), [_module_name(entry)]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_every_harness_module_sits_in_its_place():
    loose = sorted(p.stem for p in HARNESS.glob("*.py") if p.stem not in TOP_LEVEL)
    folders = {p.name for p in HARNESS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert not loose and folders == FOLDERS, (loose, folders)


def test_the_sandboxed_side_imports_nothing_of_the_parents():
    for entry in CHILD_ENTRIES:
        trusted = sorted(m for m in _reached(ROOT / entry) if m.startswith(TRUSTED))
        assert not trusted, f"{entry} reaches {trusted}"
    loop = _reached(HARNESS / "worker" / "__main__.py")
    assert all(m == "harness.worker" or m.startswith("harness.worker.") for m in loop), sorted(loop)
    for path in sorted((HARNESS / "worker").glob("*.py")):
        assert not {m for m in harness_imports(path) if m.startswith(TRUSTED)}, path


def test_every_process_that_runs_submission_code_starts_on_the_sandboxed_side():
    """A child started with `python -m harness.X` or from a file path of the harness is one of
    CHILD_ENTRIES (or the static scan's child, which only parses the file)."""
    started = set()
    for path in sorted(HARNESS.rglob("*.py")):
        text = path.read_text()
        started |= {m for m in __import__("re").findall(r'"-m", "(harness[\w.]*)"', text)}
    allowed = {_module_name(ROOT / e).removesuffix(".__main__") for e in CHILD_ENTRIES}
    assert started <= allowed, sorted(started - allowed)


def test_the_parent_and_the_task_import_nothing_of_the_report_or_the_command_line():
    for folder in ("parent", "task"):
        for path in sorted((HARNESS / folder).glob("*.py")):
            wrong = {m for m in harness_imports(path) if m.startswith(("harness.report", "harness.cli", "harness.api"))}
            assert not wrong, f"{path.name} imports {sorted(wrong)}"
    for name in ("results", "timing", "ties", "device"):
        assert all(m in {"harness.results", "harness.timing", "harness.ties"}
                   for m in harness_imports(HARNESS / f"{name}.py")), name


def test_a_task_uses_only_the_public_task_api():
    task_api = lambda m: m == "harness.device" or m == "harness.task" or m.startswith("harness.task.")  # noqa: E731
    for path in [*sorted((HARNESS / "task").glob("*.py")), ROOT / "reference.py", *sorted(ROOT.glob("tasks/*/reference.py"))]:
        wrong = {m for m in harness_imports(path) if not task_api(m)}
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"


def test_downstream_modules_read_the_results_not_the_engine():
    downstream = [HARNESS / "results.py", HARNESS / "timing.py", HARNESS / "cli" / "popcorn.py"]
    for path in downstream + sorted((HARNESS / "report").glob("*.py")):
        assert "harness.parent.engine" not in harness_imports(path), path.name


def test_the_cli_dispatches_and_the_run_module_runs():
    """harness/cli/__init__.py parses, checks and dispatches; a run's lifecycle (the database's run, the
    evaluations) is harness/cli/run.py's, which knows nothing of the dispatching module."""
    cli = ast.parse((HARNESS / "cli" / "__init__.py").read_text())
    called = {node.func.attr for node in ast.walk(cli)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}
    lifecycle = {"start_run", "end_run", "finish_run", "add_submission", "save_bandwidth"}
    assert not called & lifecycle, f"cli calls {sorted(called & lifecycle)}"
    evaluators = {"harness.parent.engine", "harness.parent.pool", "harness.parent.ray_backend"}
    assert not harness_imports(HARNESS / "cli" / "__init__.py") & evaluators
    assert "harness.cli" not in harness_imports(HARNESS / "cli" / "run.py")
    run = ast.parse((HARNESS / "cli" / "run.py").read_text())
    assert {"start_run", "finish_run"} <= {node.attr for node in ast.walk(run) if isinstance(node, ast.Attribute)}


def test_results_and_history_need_no_torch(tmp_path):
    code = ("import sys; import harness.results, harness.report, harness.report.store, harness.cli.popcorn, harness.cli.run; "
            "from harness.cli import main; "
            f"harness.report.store.Store({str(tmp_path / 'r.db')!r}); "
            f"assert main(['--mode', 'history', '--db', {str(tmp_path / 'r.db')!r}]) == 0; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"


def import_graph() -> dict[str, set[str]]:
    """harness module -> the harness modules it imports (at any depth of its code: lazy imports count)."""
    graph = {}
    for path in sorted(HARNESS.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        graph[name] = {m for m in harness_imports(path) if m != name}
    return graph


def test_the_harness_imports_form_no_circle():
    """No module reaches itself through imports, lazy ones included (a circle is where an
    initialisation-order bug or a hidden dependency hides)."""
    graph = import_graph()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                raise AssertionError("import circle: " + " -> ".join(path[path.index(nxt):] + [nxt]))
            if nxt in graph and not state.get(nxt):
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in graph:
        if not state.get(node):
            visit(node)


def test_the_audit_does_not_import_the_engine():
    assert "harness.parent.engine" not in import_graph()["harness.parent.audit"]


MODULE_LINES, FUNCTION_LINES = 400, 60


def test_modules_and_functions_stay_small():
    """No module of harness/ over MODULE_LINES lines, no function over FUNCTION_LINES: a function that
    does one thing fits a screen, a module that holds one concern a short read."""
    too_long = []
    for path in sorted(HARNESS.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        if len(text.splitlines()) > MODULE_LINES:
            too_long.append(f"{name}: {len(text.splitlines())} lines (limit {MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > FUNCTION_LINES:
                    too_long.append(f"{name}:{node.lineno} {node.name}: {lines} lines (limit {FUNCTION_LINES})")
    assert not too_long, "\n".join(too_long)
