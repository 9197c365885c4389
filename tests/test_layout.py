"""The import graph keeps its shape: the sandboxed side imports nothing of the parent's, and the
results everything downstream reads are torch-free."""

import ast
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

HARNESS = ROOT / "harness"
# What code inside the sandbox may import from the harness: the wire it shares with the parent and
# the `task` / `utils` modules competition files import.
WORKER_MAY_IMPORT = {"harness.channel", "harness.shared_memory", "harness.compat", "harness.worker",
                     "harness.worker.timer", "harness.worker.loop"}


def harness_imports(path: Path) -> set[str]:
    """The harness modules a file imports (`from harness import x` counts as harness.x)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "harness":
            found |= {f"harness.{a.name}" for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harness."):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("harness")}
    return found


def test_the_sandboxed_side_imports_nothing_of_the_parents():
    for path in sorted((HARNESS / "worker").glob("*.py")):
        imported = harness_imports(path)
        assert imported <= WORKER_MAY_IMPORT, f"{path.name} imports {sorted(imported - WORKER_MAY_IMPORT)}"
    for shared in ("channel.py", "shared_memory.py", "compat.py"):
        assert harness_imports(HARNESS / shared) == set(), shared


def test_downstream_modules_read_the_results_not_the_engine():
    downstream = [HARNESS / name for name in ("results.py", "store.py", "plots.py", "popcorn.py", "timing.py")]
    for path in downstream + sorted((HARNESS / "report").glob("*.py")):
        assert "harness.engine" not in harness_imports(path), path.name


def test_the_cli_dispatches_and_the_run_module_runs():
    """cli.py parses, checks and dispatches; a run's lifecycle (the database's run, the evaluations)
    is harness/run.py's, which knows nothing of the command line module."""
    cli = ast.parse((HARNESS / "cli.py").read_text())
    called = {node.func.attr for node in ast.walk(cli)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}
    lifecycle = {"start_run", "end_run", "finish_run", "add_submission", "save_bandwidth"}
    assert not called & lifecycle, f"cli.py calls {sorted(called & lifecycle)}"
    evaluators = {"harness.engine", "harness.pool", "harness.ray_backend"}
    assert not harness_imports(HARNESS / "cli.py") & evaluators
    assert "harness.cli" not in harness_imports(HARNESS / "run.py")
    run = ast.parse((HARNESS / "run.py").read_text())
    assert {"start_run", "finish_run"} <= {node.attr for node in ast.walk(run) if isinstance(node, ast.Attribute)}


def test_results_and_history_need_no_torch(tmp_path):
    code = ("import sys; import harness.results, harness.report, harness.store, harness.popcorn, harness.run; "
            "from harness.cli import main; "
            f"harness.store.Store({str(tmp_path / 'r.db')!r}); "
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
    assert "harness.engine" not in import_graph()["harness.audit"]


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
