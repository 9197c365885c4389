"""An exception raised by a submission ends its one-line reason with the place in the file it came
from, `(file.py:LINE)`: the innermost frame of the traceback that runs the submission's own file
(harness/worker/loop.py, _place), at import and inside custom_kernel."""

import json
import sys
import textwrap
import traceback

import pytest
from conftest import cli

from harness.worker import loop


def write(folder, name: str, text: str):
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def reasons(tmp_path, *files) -> dict[str, str]:
    """Each file's first failure reason, from a test run on the small second task (through the CLI,
    its JSON export)."""
    out = tmp_path / "out.json"
    assert cli(tmp_path, "--task", "rmsnorm", "--mode", "test", "--json", str(out),
               *(arg for f in files for arg in ("--submission", str(f)))) == 1
    found: dict[str, str] = {}
    for row in json.loads(out.read_text())["rows"]:
        name = row["submission"].rsplit("/", 1)[-1]
        found.setdefault(name, row["error"] or (row["detail"] if row.get("case_ok") is False else None))
    return found


def test_an_exception_in_custom_kernel_names_the_innermost_line_of_the_file(tmp_path):
    divides = write(tmp_path, "divides.py", '''
        """Divides by zero in a helper the kernel calls."""


        def helper(x):
            return x / 0


        def custom_kernel(data):
            return helper(1)
        ''')
    parses = write(tmp_path, "parses.py", '''
        import json


        def custom_kernel(data):
            return json.loads("{")
        ''')  # raised inside the json module: the place is the file's own line that called it
    found = reasons(tmp_path, divides, parses)
    assert found["divides.py"] == "exception: ZeroDivisionError: division by zero (divides.py:5)"
    assert found["parses.py"].startswith("exception: JSONDecodeError: Expecting property name")
    assert found["parses.py"].endswith(" (parses.py:5)")


def test_an_exception_at_import_names_its_line(tmp_path):
    crashes = write(tmp_path, "crashes.py", '''
        import torch


        def pick_device():
            raise RuntimeError("no device for this kernel")


        DEVICE = pick_device()
        ''')
    builds = write(tmp_path, "builds_code.py", '''
        """Compiles generated code that does not parse, at import."""
        KERNEL = compile("def f(:\\n    pass\\n", "generated.py", "exec")
        ''')
    found = reasons(tmp_path, crashes, builds)
    assert found["crashes.py"] == ("import error: failed while importing: RuntimeError: no device for this kernel"
                                   " (crashes.py:5)")
    # not "syntax error at line 1" of the submission: the code it compiled has it, on its line 2
    assert found["builds_code.py"].startswith("import error: failed while importing: SyntaxError: ")
    assert found["builds_code.py"].endswith("(generated.py, line 1) (builds_code.py:2)")


def test_a_missing_module_keeps_its_hint_before_the_place(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # (load_module puts the file's folder first)
    monkeypatch.setitem(sys.modules, "submission", None)  # (and the module it loads goes with the test)
    missing = write(tmp_path, "missing.py", '''
        import torch
        import aiter
        ''')
    with pytest.raises(loop._LoadError) as caught:
        loop._load(str(missing))
    assert caught.value.kind == "import error"
    assert str(caught.value) == ("ModuleNotFoundError: No module named 'aiter' (aiter is an AMD ROCm package; this"
                                 " machine does not have it) (missing.py:2)")


def raised(code: str, filename: str) -> BaseException:
    """The exception that running `code`, compiled as `filename`, raises."""
    try:
        exec(compile(code, filename, "exec"), {})
    except Exception as exc:  # noqa: BLE001 (any: it is the subject)
        return exc
    raise AssertionError("did not raise")


def test_a_long_message_is_cut_so_the_place_stays_and_the_reason_is_one_line():
    exc = raised("def f():\n    raise ValueError('many words\\n' * 400)\nf()\n", "/some/folder/long_message.py")
    text = loop._reason(exc, "/some/folder/long_message.py")
    assert text.endswith("... (long_message.py:2)") and text.startswith("ValueError: many words many words")
    assert len(text) <= loop.REASON_LIMIT and "\n" not in text
    named = "class " + "E" * 200 + "(Exception):\n    pass\n\n\nraise " + "E" * 200 + "('x' * 300)\n"
    text = loop._reason(raised(named, "/f/named.py"), "/f/named.py")  # a long class name: cut at the limit
    assert len(text) == loop.REASON_LIMIT and text.endswith("xx... (named.py:5)")
    # a file name past PLACE_NAME_LIMIT is shortened, never the line
    name = "k" * 200 + ".py"
    text = loop._reason(raised("raise KeyError(1)\n", f"/x/{name}"), f"/x/{name}")
    assert text == f"KeyError: 1 ({'k' * (loop.PLACE_NAME_LIMIT - 3)}...:1)"


def test_no_place_when_no_frame_runs_the_file():
    exc = raised("raise ValueError('elsewhere')\n", "/x/other.py")
    assert loop._reason(exc, "/x/submission.py") == "ValueError: elsewhere"
    assert traceback.extract_tb(exc.__traceback__)[-1].filename == "/x/other.py"
