"""lab/ (device experiments, kept apart from the product) reaches the harness only through its public
entry points, harness/api.py: every Python script there imports (so a refactor that breaks one
fails here, not on the next scarce GPU call), imports nothing else of the harness, and the shell
scripts run the CLI and lab scripts, not harness internals. BENCHMARKS.md's top section is the one
lab/benchmarks_top.py writes."""

import ast
import importlib.util
import json
import re
import sys

import pytest

from conftest import ROOT

LAB = ROOT / "lab"
SCRIPTS = sorted(LAB.glob("*.py"))


def _harness_imports(path):
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "harness":
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.split(".")[0] == "harness"]
    return found


def test_lab_scripts_use_only_the_public_entry_points():
    import harness.api as api

    wrong = []
    for path in SCRIPTS:
        for module, names in _harness_imports(path):
            if module != "harness.api":
                wrong.append(f"{path.name}: imports {module}")
            wrong += [f"{path.name}: harness.api has no {name}" for name in names if not hasattr(api, name)]
    assert SCRIPTS and not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_each_lab_script_imports(path, monkeypatch):
    """Importing runs a script's top level only (each keeps its work under `if __name__ == "__main__"`)."""
    monkeypatch.setattr("sys.argv", [str(path)])
    monkeypatch.syspath_prepend(str(ROOT))
    spec = importlib.util.spec_from_file_location(f"lab_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # (dataclasses look their module up there)
    spec.loader.exec_module(module)


def test_lab_shell_scripts_run_the_cli_not_harness_internals():
    inside = re.compile(r"\b(?:from|import)\s+harness(?!\.api\b)[\w.]*|-m\s+harness\b|harness/[\w/]+\.py\"?\s*$")
    wrong = [f"{path.name}:{n}: {line.strip()}" for path in sorted(LAB.glob("*.sh"))
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if not line.lstrip().startswith("#") and (inside.search(line) or re.search(r"sed -i.*harness/", line))]
    assert not wrong, "\n".join(wrong)


def test_the_benchmarks_top_section_is_the_generated_one(tmp_path):
    spec = importlib.util.spec_from_file_location("lab_benchmarks_top", LAB / "benchmarks_top.py")
    top = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(top)
    text = (ROOT / "BENCHMARKS.md").read_text()
    assert text.count(top.BEGIN) == 1 and text.count(top.END) == 1 and text.index(top.BEGIN) < text.index("\n## 2026")
    assert re.search(r"Commit [0-9a-f]{7,}", text[text.index(top.BEGIN):text.index(top.END)])
    run = {"run": {"device": "GPU X", "timing": "fenced", "check": "strict", "torch": "t", "triton": "3"},
           "rows": [{"submission": "a.py", "rank": 1, "geomean_us": 10.0, "kind": "benchmark", "case": "4×1k",
                     "case_ok": True, "median_us": 12.5, "slot_copy_us": 3.0}]}
    (tmp_path / "run.json").write_text(json.dumps(run))
    bench = tmp_path / "B.md"
    bench.write_text("# Benchmarks\n\nintro\n\n## 2026-01-01, a run\nraw\n")
    for _ in range(2):  # written once, then replaced in place
        assert top.main([str(tmp_path / "run.json"), "--commit", "abc1234", "--date", "2026-12-07",
                         "--benchmarks", str(bench)]) == 0
    out = bench.read_text()
    assert out.count(top.BEGIN) == 1 and "Commit abc1234, 2026-12-07, GPU X" in out
    assert "| 1 | a.py | 10.0 | 12.5 |" in out and out.endswith("## 2026-01-01, a run\nraw\n")
