"""The static scan (harness/parent/scan.py): kernelguard's findings on a file's source, from a child
process with a time limit, so a file built to stall the scanner cannot stall the run."""

import time

import pytest
from conftest import ROOT

from harness.parent import scan

pytestmark = pytest.mark.skipif(scan.kernelguard is None, reason="kernelguard not installed")


def test_findings_come_back_from_the_child_process():
    found = scan.scan(ROOT / "tests" / "zoo" / "prints_results.py")
    assert found.classification == "hacked"
    assert any(flag.startswith("FAKE_BENCHMARK_EMIT (") for flag in found.flags)
    assert scan.scan(ROOT / "submissions" / "triton_bf16.py").classification == "clean"  # (kernelguard's "valid")


def test_a_file_that_stalls_the_scanner_is_left_unscanned_at_the_time_limit():
    start = time.monotonic()
    found = scan.scan(ROOT / "tests" / "zoo_os" / "stalls_scanner.py", seconds=0.5)
    assert found == scan.ScanResult("not scanned (kernelguard ran over 0.5 s)", ())
    assert time.monotonic() - start < 3


def test_an_oversized_or_unreadable_file_is_not_handed_to_the_scanner(tmp_path, monkeypatch):
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * 600)
    monkeypatch.setattr(scan, "SCAN_MAX_BYTES", 2048)
    assert scan.scan(big) == scan.ScanResult("not scanned (source over 2 KB)", ())
    assert scan.scan(tmp_path / "missing.py").classification == "not scanned (No such file or directory)"


def test_the_child_imports_the_parents_kernelguard_wherever_it_is_installed(tmp_path, monkeypatch):
    # A kernelguard outside the standard locations (PYTHONPATH, the user's site folder: `python -I`
    # ignores both), as one file or as a package: the child must still find the parent's.
    child = ('def analyze_code(source, compute_structural_hash=False):\n'
             '    return {"classification": "from-KIND", "matched_patterns": []}\n')
    for kind, file in (("file", tmp_path / "one" / "kernelguard.py"),
                       ("package", tmp_path / "two" / "kernelguard" / "__init__.py")):
        file.parent.mkdir(parents=True)
        file.write_text(child.replace("KIND", kind))
        fake = type(scan.kernelguard)("kernelguard")
        fake.__file__ = str(file)
        monkeypatch.setattr(scan, "kernelguard", fake)
        assert scan.scan(ROOT / "submissions" / "triton_bf16.py").classification == f"from-{kind}"


def test_the_scanner_reads_the_text_python_runs(tmp_path):
    """Red-team pass 14: with `# coding: utf-7`, `+AAo-` in a comment is a line break to Python, so
    code the scanner read as a comment ran. The child decodes the file as Python does."""
    line = "import sys; sys.modules['torch'].allclose = lambda *a, **k: True"
    plain = tmp_path / "plain.py"
    plain.write_text(f"# plain\n# note\n{line}\n")  # the line where Python reads it in the hidden file
    hidden = tmp_path / "hidden.py"
    hidden.write_bytes(b"# -*- coding: utf-7 -*-\n# note +AAo-" + line.replace("_", "+AF8-").encode() + b"\n")
    assert scan.read_source(hidden).decode("utf-7").count(line) == 1  # (what Python compiles)
    assert scan.scan(hidden).flags == scan.scan(plain).flags != ()
