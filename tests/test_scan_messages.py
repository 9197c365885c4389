"""What the static scan says (harness/parent/scan.py): a file that does not compile is a syntax error with its
line, kernelguard or not; each flag names the line of the file behind it and what it means; the
README's own example kernels scan clean; the leaderboard's exports and the database carry the same."""

import json
import re
import sqlite3
import textwrap

import pytest
from conftest import ROOT, ZOO, cli

from harness.parent import scan

needs_kernelguard = pytest.mark.skipif(scan.kernelguard is None, reason="kernelguard not installed")

FLAGGED = '''
import torch
import reference


def custom_kernel(data):
    q = data[0]
    print("Ranked Benchmark")
    scores = torch.bmm(q, q.transpose(1, 2))
    return torch.bmm(scores.softmax(-1), q)
'''
FLAGGED_SUMMARY = ("hacked: DECODE_MM_REF line 8 (the output comes from a torch matmul, not its own kernel); "
                   "FAKE_BENCHMARK_EMIT line 7 (prints benchmark-like results); "
                   "TRUSTED_MODULE_IMPORT line 2 (imports one of the evaluator's modules)")

CONTRACT = '''
import torch


def custom_kernel(data):
    q, kv_data, qo_indptr, kv_indptr, config = data
    k = kv_data["bf16"][:, 0].float()
    s = torch.einsum("qhd,ld->qhl", q.float(), k) * config["sm_scale"]
    return (s.softmax(-1) @ k[:, :512]).to(torch.bfloat16)
'''  # fp32 math on bf16 inputs, a bf16 output: what the precision contract asks


def write(folder, name: str, text: str):
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def readme_kernels() -> list[str]:
    """The README's Python code blocks that define custom_kernel."""
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
    return [block for block in blocks if "def custom_kernel" in block]


@needs_kernelguard
def test_the_readmes_own_example_kernels_scan_clean(tmp_path):
    blocks = readme_kernels()
    assert blocks, "README.md has no ```python block that defines custom_kernel"
    for i, block in enumerate(blocks):
        found = scan.scan(write(tmp_path, f"readme_{i}.py", block))
        assert (found.classification, found.flags) == ("clean", ()), f"README block {i + 1}: {found.summary()}"


@pytest.mark.parametrize("kernelguard", ["installed", "absent"])
def test_a_file_that_does_not_compile_is_a_syntax_error_with_its_line(tmp_path, monkeypatch, kernelguard):
    if kernelguard == "absent":
        monkeypatch.setattr(scan, "kernelguard", None)
    elif scan.kernelguard is None:
        pytest.skip("kernelguard not installed")
    found = scan.scan(ZOO / "syntax_error.py")
    assert found.classification == scan.SYNTAX_ERROR
    assert found.summary() == "syntax error at line 3: expected ':'"  # as the worker says it
    late = write(tmp_path, "late.py", '''
        def custom_kernel(data):
            return data[0]


        return None
        ''')  # parses, but does not compile
    assert scan.scan(late).summary() == "syntax error at line 5: 'return' outside function"
    fine = scan.scan(write(tmp_path, "fine.py", CONTRACT))
    assert fine.classification == ("clean" if kernelguard == "installed" else "not scanned (kernelguard not installed)")


@needs_kernelguard
def test_each_flag_names_its_line_and_what_it_means(tmp_path):
    found = scan.scan(write(tmp_path, "flagged.py", FLAGGED))
    assert found.summary() == FLAGGED_SUMMARY
    assert ("DECODE_MM_REF (medium) line 8: the output comes from a torch matmul, not its own kernel "
            "[kernelguard: torch.bmm used inside custom_kernel") in "\n".join(found.flags)  # kernelguard's words kept


@needs_kernelguard
def test_a_precision_round_trip_is_flagged_at_its_line_and_the_contracts_casts_are_not(tmp_path):
    assert scan.scan(write(tmp_path, "contract.py", CONTRACT)).summary() == "clean"
    round_trip = CONTRACT.replace(
        '    s = torch.einsum("qhd,ld->qhl", q.float(), k) * config["sm_scale"]\n',
        '    q16 = (q.float() * config["sm_scale"]).to(torch.bfloat16)\n'
        '    s = torch.einsum("qhd,ld->qhl", q16.float(), k)\n')  # q rounded to bf16 and used in fp32: line 8
    expected = "low_confidence: PRECISION_DOWNGRADE line 8 (a value cast down to 16 bits is cast back up)"
    assert scan.scan(write(tmp_path, "round_trip.py", round_trip)).summary() == expected
    through_helper = '''
        import torch


        def lower(x):
            return x.bfloat16()


        def custom_kernel(data):
            q, kv_data, qo_indptr, kv_indptr, config = data
            k = lower(kv_data["fp8"][0].float() * kv_data["fp8"][1])
            s = torch.einsum("qhd,ld->qhl", q.float(), k[:, 0].float())
            return (s.softmax(-1) @ k[:, 0, :512].float()).to(torch.bfloat16)
        '''
    expected = "low_confidence: PRECISION_DOWNGRADE line 11 (a value cast down to 16 bits is cast back up)"
    assert scan.scan(write(tmp_path, "helper.py", through_helper)).summary() == expected


def test_a_summary_of_flags_in_the_earlier_form_names_the_patterns():
    earlier = scan.ScanResult("suspicious", ("TIMER_MONKEYPATCH (high): torch.cuda.Event.elapsed_time = f",))
    assert earlier.summary() == "suspicious: TIMER_MONKEYPATCH (torch.cuda.Event.elapsed_time = f)"
    assert scan.ScanResult("clean", ()).summary() == "clean"


@needs_kernelguard
def test_exports_and_the_database_carry_the_lines(tmp_path):
    flagged = write(tmp_path, "flagged.py", FLAGGED)
    out = tmp_path / "out.json"
    assert cli(tmp_path, "--task", "rmsnorm", "--mode", "test", "--json", str(out),
               "--submission", str(flagged), "--submission", str(ZOO / "syntax_error.py")) == 1
    shown = {row["submission"].rsplit("/", 1)[-1]: row["static_scan"] for row in json.loads(out.read_text())["rows"]}
    assert shown == {"flagged.py": FLAGGED_SUMMARY, "syntax_error.py": "syntax error at line 3: expected ':'"}
    with sqlite3.connect(tmp_path / "r.db") as db:
        stored = dict(db.execute("SELECT name, flags FROM submissions"))
    assert "DECODE_MM_REF (medium) line 8: " in "\n".join(json.loads(stored["flagged.py"]))
    assert json.loads(stored["syntax_error.py"]) == ["SYNTAX_ERROR line 3: expected ':'"]
