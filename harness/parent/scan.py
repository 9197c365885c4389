"""Static scan of a submission's source with kernelguard (PyPI, MIT): flags for review.

Runs on the source text only (the file is compiled, never run; kernelguard parses it), in a child
process of the parent with a time limit. A file that does not compile is reported as a syntax error
with its line, and kernelguard is not asked. Each finding names the line of the file behind it and
what it means in a few words. Findings are recorded and shown beside the verdict; they never change
it: the runtime defences decide.
"""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import Optional

from harness.results import SYNTAX_ERROR, ScanResult
from harness.parent.source import MAX_SOURCE_BYTES, SourceError, declared_variant, read_source  # noqa: F401

try:  # imported with this module, before any worker starts (harness/cli/__init__.py)
    import kernelguard
except ImportError:
    kernelguard = None


SCAN_SECONDS = 10.0
SCAN_MAX_BYTES = 256 * 1024
# The child: `python -I -c _CHILD HARNESS_ROOT KERNELGUARD_ROOT FILE` (KERNELGUARD_ROOT "" without
# kernelguard): this module's _child, the harness's folder first on its path, then kernelguard's.
_CHILD = """import sys
sys.path[:0] = [p for p in sys.argv[1:3] if p]
from harness.parent.scan import _child
_child(sys.argv[3], use_kernelguard=bool(sys.argv[2]))
"""

# What each kernelguard pattern means, in a few words (shown beside its name and line). A pattern
# missing here (a later kernelguard) is shown with kernelguard's own evidence.
MEANINGS = {
    "TIMER_MONKEYPATCH": "replaces a timing function",
    "FAKE_BENCHMARK_EMIT": "prints benchmark-like results",
    "STDIO_REDIRECT": "redirects stdout or stderr",
    "EVALUATOR_EXPLOIT": "reaches into the evaluator's main module",
    "HARNESS_RUNTIME_PATCHING": "patches the harness at run time",
    "TORCH_VALIDATION_MONKEYPATCH": "replaces a torch function a check uses",
    "MODULE_MUTATION": "changes an evaluator module",
    "GLOBALS_MUTATION": "changes another module's globals",
    "FRAME_WALK_MUTATION": "changes variables through stack frames",
    "FRAME_WALK_ACCESS": "reads stack frames",
    "CODE_REPLACEMENT": "replaces a function's code",
    "CODE_ACCESS": "reads a function's code object",
    "EVALUATOR_MODE_BRANCH": "behaves differently when benchmarked",
    "BENCHMARK_SHAPE_REPLAY": "may replay an output for known benchmark shapes",
    "OUTPUT_REPLAY_CACHE": "may return a stored output instead of computing it",
    "LAST_CALL_REPLAY": "may return the previous call's output",
    "SHAPE_OUTPUT_REPLAY": "may return an output stored by shape",
    "TIMED_INPUT_REPLAY": "may reuse work done on an earlier input",
    "CONFIG_CACHE_EXPLOIT": "may return an output stored by config",
    "POINTER_REPLAY": "may return an output stored by input address",
    "RESULT_BANK_REPLAY": "may return a precomputed output",
    "SEQUENCE_BATCH_GRAPH": "may replay one graph for several calls",
    "PARTIAL_GRAPH_KEY": "keys a CUDA graph on part of the input",
    "SCALED_MM_REF": "the output comes from torch._scaled_mm, not its own kernel",
    "DECODE_MM_REF": "the output comes from a torch matmul, not its own kernel",
    "SILENT_FALLBACK": "falls back to a torch matmul on error",
    "PREPROCESS_CACHE": "keeps preprocessed inputs across calls",
    "WORKSPACE_CACHE": "keeps buffers or graphs across calls",
    "RUNNER_PLAN_CACHE": "keeps a launch plan across calls",
    "CUDA_GRAPH_REPLAY": "replays a CUDA graph",
    "CUDA_GRAPH_PYTHON": "captures and replays a CUDA graph",
    "UNSYNC_MULTISTREAM": "runs work on side streams",
    "CUDA_EVENT_DISABLE_TIMING": "creates CUDA events without timing",
    "THREAD_INJECTION": "runs work in a thread or process",
    "LAZY_TENSOR": "a tensor subclass that may defer its work",
    "TENSOR_INSTANCE_METHOD_OVERRIDE": "overrides a tensor's methods",
    "TRIVIAL_PROBE": "only returns None or an empty list",
    "INPUT_PASSTHROUGH_OUTPUT": "returns its input as the output",
    "INPUT_REDUCTION_OUTPUT": "returns a reduction of its input as the output",
    "SELF_MATMUL_OUTPUT": "returns its input times itself as the output",
    "TORCH_COMPILE_CACHE": "uses torch.compile",
    "HARDCODED_SHAPES": "tuned for exact benchmark shapes",
    "BENCHMARK_UNSAFE_ALGO_DISPATCH": "special-cases benchmark inputs",
    "INPUT_STRUCTURE_TRUNCATION_DISPATCH": "may skip part of its input",
    "TRUSTED_MODULE_IMPORT": "imports one of the evaluator's modules",
    "GLOBALS_ACCESS": "reads another module's globals",
    "SYS_MODULES_ACCESS": "reads sys.modules",
    "REFERENCE_PRECOMPUTE_REPLAY": "precomputes the reference's answer",
    "OBFUSCATED_EXEC": "runs obfuscated code",
    "DYNAMIC_EXECUTION": "runs code built at run time",
    "MODULE_RELOAD": "reloads a module",
    "PRECISION_DOWNGRADE": "a value cast down to 16 bits is cast back up",
    "TOKEN_PASTE_CUDA_API": "builds CUDA API names to hide them",
    "RUNTIME_PACKAGE_INSTALL": "installs packages at run time",
}


def _import_root(module) -> Path:
    """The folder on the import path that holds `module`: kernelguard ships as one file
    (`kernelguard.py`), a later release may be a package. `python -I` keeps only the standard
    locations, so a kernelguard installed elsewhere (PYTHONPATH, the user's site folder) is found
    through this folder alone."""
    file = Path(module.__file__).resolve()
    return file.parent.parent if file.name == "__init__.py" else file.parent


def scan(path: Path, seconds: Optional[float] = None) -> ScanResult:
    """The file's syntax check and kernelguard's findings, each with its line (see _child), from a
    child process (`python -I`: the parent's kernelguard, no other path) ended after `seconds`
    (default SCAN_SECONDS). Without kernelguard: the syntax check alone."""
    seconds = SCAN_SECONDS if seconds is None else seconds
    try:
        size = path.stat().st_size
    except OSError as exc:
        return ScanResult(f"not scanned ({exc.strerror or type(exc).__name__})", ())
    if size > SCAN_MAX_BYTES:
        return ScanResult(f"not scanned (source over {SCAN_MAX_BYTES // 1024} KB)", ())
    where = str(_import_root(kernelguard)) if kernelguard is not None else ""
    own = str(Path(__file__).resolve().parents[2])
    try:
        run = subprocess.run([sys.executable, "-I", "-c", _CHILD, own, where, str(path)], capture_output=True,
                             text=True, timeout=seconds)
        found = json.loads(run.stdout) if run.returncode == 0 else None
        why = (run.stderr.strip().splitlines() or [f"exit {run.returncode}"])[-1].split(":")[0][:60]
    except subprocess.TimeoutExpired:
        return ScanResult(f"not scanned ({'kernelguard' if where else 'the syntax check'} ran over {seconds:g} s)", ())
    except (OSError, ValueError) as exc:
        found, why = None, type(exc).__name__
    if not isinstance(found, dict):  # a scanner bug must not stop an evaluation
        return ScanResult(f"not scanned (kernelguard failed: {why})", ())
    if "syntax_error" in found:
        line, message = found["syntax_error"]
        return ScanResult(SYNTAX_ERROR, (f"SYNTAX_ERROR{f' line {line}' if line else ''}: {message}"[:300],))
    if kernelguard is None:
        return ScanResult("not scanned (kernelguard not installed)", ())
    flags = tuple(_flag(pattern, severity, evidence, line) for pattern, severity, evidence, line in found["matched"])
    return ScanResult(found["classification"], flags)


def _flag(pattern: str, severity: str, evidence: str, line: Optional[int]) -> str:
    """One finding as shown and stored: "PATTERN (severity) line N: meaning [kernelguard: evidence]"."""
    where = f" line {line}" if line else ""
    meaning = MEANINGS.get(pattern) or " ".join(evidence.split())[:80]
    return f"{pattern} ({severity}){where}: {meaning} [kernelguard: {evidence}]"[:300]


# ------------------------------------------------------------------ the child process
def _child(path: str, use_kernelguard: bool) -> None:
    """Print the scan of the file at `path` as JSON: {"syntax_error": [line, message]} when it does
    not compile (compiled from its bytes, as the worker compiles them), else {"classification",
    "matched": [[pattern, severity, evidence, line or null], ...]}: kernelguard's findings, each
    with the line of the file behind it (_line), its PRECISION_DOWNGRADE kept only where a value
    cast down to 16 bits is cast back up (_round_trip), and its classification redone without the
    ones left out; kernelguard's "valid" reads "clean"."""
    import importlib.util

    with open(path, "rb") as f:
        data = f.read()
    try:
        compile(data, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        print(json.dumps({"syntax_error": [exc.lineno, exc.msg or str(exc)]}))
        return
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes (older Pythons); nested too deep
        print(json.dumps({"syntax_error": [None, f"{type(exc).__name__}: {exc}"[:200]]}))
        return
    if not use_kernelguard:
        print(json.dumps({"classification": "not scanned", "matched": []}))
        return
    if kernelguard is None:  # the parent's is not on this path: said as the parent's "kernelguard failed"
        raise ModuleNotFoundError("No module named 'kernelguard'")
    try:  # the text Python runs: its coding line honoured (utf-7 turns a comment's +AAo- into a new line)
        text = importlib.util.decode_source(data)
    except Exception:
        text = data.decode("utf-8", errors="replace")
    found = kernelguard.analyze_code(text, compute_structural_hash=False)
    matched = list(found.get("matched_patterns", []))
    classification = str(found.get("classification", "unknown"))
    try:
        tree = ast.parse(text)
        code, literal = _line_texts(text)
        entry = _entry_lines(tree)
        round_trip = _round_trip(tree)
    except Exception:  # (lines are a help; kernelguard's findings stand without them)
        tree = None
    kept = []
    for m in matched:
        pattern, evidence = str(m.get("pattern", "?")), str(m.get("evidence", "?"))
        line = None
        if tree is not None:
            if pattern == "PRECISION_DOWNGRADE":
                if round_trip is None:  # both casts, but never on one value: not a round trip
                    continue
                line = round_trip
            else:
                line = _line(pattern, evidence, code, literal, entry)
        kept.append((m, [pattern, str(m.get("severity", "?")), evidence, line]))
    if len(kept) < len(matched) and hasattr(kernelguard, "classify"):
        classification = str(kernelguard.classify([m for m, _ in kept])[0])
    print(json.dumps({"classification": "clean" if classification == "valid" else classification,
                      "matched": [row for _, row in kept]}))


def _line_texts(text: str) -> tuple[dict[int, str], dict[int, str]]:
    """Per line number, the line's code with comments and string literals left out, and its text
    with only the comments left out."""
    lines = text.splitlines()
    code = {n: line for n, line in enumerate(lines, 1)}
    literal = dict(code)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        (row, col), (end_row, end_col) = token.start, token.end
        if token.type == tokenize.COMMENT:
            code[row] = code[row][:col]
            literal[row] = literal[row][:col]
        elif token.type == tokenize.STRING or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            for n in range(row, end_row + 1):
                start = col if n == row else 0
                end = end_col if n == end_row else len(code[n])
                code[n] = code[n][:start] + " " * (end - start) + code[n][end:]
    return code, literal


def _entry_lines(tree: ast.Module) -> range:
    """The lines of the entry point's definition (`custom_kernel`, or kernelguard's names), or none."""
    names = set(getattr(kernelguard, "_entrypoint_candidates", lambda: ("custom_kernel",))())
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            return range(node.lineno, (node.end_lineno or node.lineno) + 1)
    return range(0)


# What kernelguard's evidence names, in the order it names them: imports, classes, dotted names,
# calls, subscripts, quoted names, and identifiers that cannot be plain words (snake_case, camelCase).
_NEEDLE = re.compile(r"(?:from\s+[\w.]+\s+)?import\s+[\w.]+|class\s+\w+|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"
                     r"|\.?[A-Za-z_]\w*\(|[A-Za-z_]\w*\[|'(\w+)'|\b(?:_\w+|[A-Za-z]\w*_\w*|[a-z]+[A-Z]\w*)\b")
_NOT_NEEDLES = {"custom_kernel", "custom_kernel(", "input.float", "input.float(", "torch.any", "torch.all"}
_CACHE_STORE = r"\w*cache\w*\s*\["
_FRAMES = r"_getframe|currentframe|\.f_(?:back|globals|locals)\b|gc\.get_(?:objects|referrers|referents)|inspect\.stack"
# Where a pattern's evidence names no code: what in the code raises it, searched first.
_HINTS = {
    "FAKE_BENCHMARK_EMIT": r"\bprint\s*\(|\bsys\.std(?:out|err)\.write\s*\(",
    "OUTPUT_REPLAY_CACHE": r"\breturn\b.*cache\w*\s*\[", "WORKSPACE_CACHE": _CACHE_STORE + r"|CUDAGraph\s*\(",
    "PREPROCESS_CACHE": _CACHE_STORE, "RUNNER_PLAN_CACHE": _CACHE_STORE,
    "FRAME_WALK_ACCESS": _FRAMES, "FRAME_WALK_MUTATION": _FRAMES,
    "GLOBALS_ACCESS": r"__globals__|\bglobals\s*\(", "GLOBALS_MUTATION": r"__globals__|\bglobals\s*\(|\bbuiltins\b",
    "CUDA_EVENT_DISABLE_TIMING": r"disable_timing|cudaEventDisableTiming", "RUNTIME_PACKAGE_INSTALL": r"\bpip\b",
    "SILENT_FALLBACK": r"\bexcept\b", "TRIVIAL_PROBE": r"\breturn\s*(?:\[\s*\]|None\b)",
    "STDIO_REDIRECT": r"\bsys\.std(?:out|err)\s*=", "UNSYNC_MULTISTREAM": r"Stream\s*\(|get_stream_from_pool",
    "HARDCODED_SHAPES": r"KERNEL_CONFIGS|\bif\b.*(?:==|\bin\b)\s*[\[(]?\s*\(?\s*\d{3,5}\s*,",
}


def _line(pattern: str, evidence: str, code: dict[int, str], literal: dict[int, str], entry: range) -> Optional[int]:
    """The line behind a finding: the first line that matches the pattern's hint (_HINTS), else that
    holds the first code-like name in kernelguard's evidence (in the entry point first, then
    anywhere; code first, then string literals), else None."""
    searches = [re.compile(_HINTS[pattern])] if pattern in _HINTS else []
    for match in _NEEDLE.finditer(evidence):
        needle = (match.group(1) or match.group(0)).strip()
        if needle not in _NOT_NEEDLES and len(needle) >= 3:
            searches.append(re.compile(r"\s+".join(map(re.escape, needle.split())), re.IGNORECASE))
    for search in searches:
        for texts in (code, literal):
            for lines in (entry, sorted(texts)):
                for n in lines:
                    if search.search(texts.get(n, "")):
                        return n
    return None


_DOWN_METHODS, _UP_METHODS = {"half", "bfloat16", "float16"}, {"float", "double", "float32"}
_DOWN_DTYPES, _UP_DTYPES = {"float16", "bfloat16", "half"}, {"float32", "float64"}


def _cast(node: ast.AST) -> Optional[str]:
    """"down" or "up" for a cast kernelguard's PRECISION_DOWNGRADE counts (`x.half()`, `x.bfloat16()`,
    `x.to(torch.bfloat16)`, `x.to(dtype=torch.float16)`; `x.float()`, `x.to(torch.float32)`, ...)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    attr = node.func.attr
    if attr in _DOWN_METHODS:
        return "down"
    if attr in _UP_METHODS:
        return "up"
    if attr == "to":
        for arg in [*node.args, *(kw.value for kw in node.keywords if kw.arg == "dtype")]:
            if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "torch":
                if arg.attr in _DOWN_DTYPES:
                    return "down"
                if arg.attr in _UP_DTYPES:
                    return "up"
    return None


def _round_trip(tree: ast.Module) -> Optional[int]:
    """The first line where a value cast down to 16 bits is cast back up, or None. kernelguard's
    PRECISION_DOWNGRADE fires on any function that holds both casts, which every kernel that keeps
    the precision contract holds (inputs up to fp32 for the math, the output down to bf16); only a
    round trip on one value loses precision. A value counts as cast down when its expression holds a
    down-cast, a name of its function (or of the module's own code) assigned one on an earlier line,
    or a call of a function that returns one; lines are taken in order (loops are not followed)."""
    owned: dict[ast.AST, list[ast.AST]] = {tree: []}  # per function (and the module): its own nodes
    todo: list[tuple[ast.AST, ast.AST]] = [(tree, child) for child in ast.iter_child_nodes(tree)]
    while todo:
        scope, node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            owned[node] = []
            todo.extend((node, child) for child in node.body)
            continue
        owned[scope].append(node)
        todo.extend((scope, child) for child in ast.iter_child_nodes(node))
    lowering: set[str] = set()  # functions that return a value cast down

    def low(expr: ast.AST, tainted: dict[str, int], line: int) -> bool:
        for node in ast.walk(expr):
            if _cast(node) == "down" or isinstance(node, ast.Name) and tainted.get(node.id, line) < line:
                return True
            if isinstance(node, ast.Call) and (getattr(node.func, "id", None) in lowering
                                               or getattr(node.func, "attr", None) in lowering):
                return True
        return False

    def roots(target: ast.AST) -> list[str]:
        while isinstance(target, (ast.Subscript, ast.Attribute, ast.Starred)):
            target = target.value
        if isinstance(target, (ast.Tuple, ast.List)):
            return [name for element in target.elts for name in roots(element)]
        return [target.id] if isinstance(target, ast.Name) else []

    def taint(nodes: list[ast.AST]) -> dict[str, int]:
        tainted: dict[str, int] = {}
        assigns = [n for n in nodes if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value]
        for stmt in sorted(assigns, key=lambda n: (n.lineno, n.col_offset)):
            if low(stmt.value, tainted, stmt.lineno):
                for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                    for name in roots(target):
                        tainted.setdefault(name, stmt.lineno)
        return tainted

    for _ in range(3):  # functions that return a value cast down, through up to three calls
        for scope, nodes in owned.items():
            if scope is not tree and scope.name not in lowering:
                tainted = taint(nodes)
                if any(isinstance(n, ast.Return) and n.value and low(n.value, tainted, n.lineno) for n in nodes):
                    lowering.add(scope.name)
    lines = []
    for nodes in owned.values():
        tainted = taint(nodes)
        lines += [n.lineno for n in nodes if _cast(n) == "up" and low(n.func.value, tainted, n.lineno)]
    return min(lines) if lines else None
