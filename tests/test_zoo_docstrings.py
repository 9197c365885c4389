"""Every zoo file says at its top what it tries and what the harness must give it (issue 18), as
pygpubench's exploits folder does, so the expected outcome does not live only in a test table."""

import ast
import re

from conftest import ROOT

FOLDERS = ("zoo", "zoo_os", "zoo_gpu", "zoo_pool")
LEADING_STRING = re.compile(r'("""|\'\'\')(.*?)\1', re.DOTALL)


def module_docstring(text: str) -> str | None:
    """The module docstring; for a file that does not parse (tests/zoo/syntax_error.py, and
    tests/zoo/nests_expression.py, too deep for the parser), the triple-quoted string it starts with
    after its header comment lines (`#!POPCORN ...`)."""
    try:
        return ast.get_docstring(ast.parse(text))
    except (SyntaxError, RecursionError):
        lines = text.splitlines(keepends=True)
        while lines and lines[0].startswith("#"):
            lines.pop(0)
        match = LEADING_STRING.match("".join(lines))
        return match.group(2) if match else None


def test_every_zoo_file_says_what_it_tries_and_must_get():
    files = sorted(p for folder in FOLDERS for p in (ROOT / "tests" / folder).glob("*.py"))
    assert len(files) > 50  # the four folders were found
    missing = [str(p.relative_to(ROOT)) for p in files
               if not all(word in (module_docstring(p.read_text()) or "") for word in ("Tries:", "Must get:"))]
    assert not missing, f"no 'Tries: ... Must get: ...' docstring: {missing}"
