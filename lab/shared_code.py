"""The code the bundled Triton kernels share, one block per group of files.

Each kernel must stay a single file that drops into a competition unchanged, so shared code is
copied into every file of its group between two marks, and one file holds the source of truth:

* the split combine, the launch plan and the direct launch: triton_bf16.py -> triton_fp8.py,
  triton_mxfp4.py;
* the choice of the sm_90 Gluon path (`_sm90_path`): triton_fp8.py -> triton_mxfp4.py.

    python lab/shared_code.py           # exit 1, naming each file whose copy differs
    python lab/shared_code.py --write   # copy each source's block into its other files

tests/test_shared_code.py runs the check in CI.
"""

import argparse
import difflib
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = ROOT / "submissions"
SOURCE = SUBMISSIONS / "triton_bf16.py"
COPIES = (SUBMISSIONS / "triton_fp8.py", SUBMISSIONS / "triton_mxfp4.py")
BEGIN = "# ==== shared code:"
END = "# ==== end of shared code ===="


class Block(NamedTuple):
    source: Path
    copies: tuple[Path, ...]
    begin: str
    end: str


BLOCKS = (
    Block(SOURCE, COPIES, BEGIN, END),
    Block(SUBMISSIONS / "triton_fp8.py", (SUBMISSIONS / "triton_mxfp4.py",),
          "# ==== shared sm_90 code:", "# ==== end of shared sm_90 code ===="),
)


class SharedCodeError(ValueError):
    """A file without exactly one well-formed shared block."""


def block_span(text: str, path: Path, begin: str = BEGIN, end: str = END) -> tuple[int, int]:
    """(start, end) of the shared block in `text`, both marks included."""
    if text.count(begin) != 1 or text.count(end) != 1:
        raise SharedCodeError(f"{path}: needs exactly one '{begin}' and one '{end}' line")
    start, stop = text.index(begin), text.index(end) + len(end)
    if stop < start:
        raise SharedCodeError(f"{path}: the end mark comes before the start mark")
    return start, stop


def block(path: Path, begin: str = BEGIN, end: str = END) -> str:
    text = path.read_text()
    start, stop = block_span(text, path, begin, end)
    return text[start:stop]


def differences(source: Path = SOURCE, copies: tuple[Path, ...] = COPIES, begin: str = BEGIN,
                end: str = END) -> dict[Path, str]:
    """{copy: unified diff against the source's block} for each copy whose block differs."""
    want = block(source, begin, end)
    out = {}
    for path in copies:
        have = block(path, begin, end)
        if have != want:
            out[path] = "".join(difflib.unified_diff(want.splitlines(True), have.splitlines(True),
                                                     str(source.name), str(path.name)))
    return out


def write(source: Path = SOURCE, copies: tuple[Path, ...] = COPIES, begin: str = BEGIN,
          end: str = END) -> list[Path]:
    """Copy the source's block into each copy; the files changed."""
    want = block(source, begin, end)
    changed = []
    for path in copies:
        text = path.read_text()
        start, stop = block_span(text, path, begin, end)
        if text[start:stop] != want:
            path.write_text(text[:start] + want + text[stop:])
            changed.append(path)
    return changed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="copy each source's block into its other files")
    args = parser.parse_args(argv)
    failed = False
    for spec in BLOCKS:
        try:
            if args.write:
                changed = write(*spec)
                print("updated: " + ", ".join(p.name for p in changed) if changed
                      else f"every copy of {spec.source.name}'s block already agrees")
                continue
            diffs = differences(*spec)
        except (SharedCodeError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for path, diff in diffs.items():
            print(f"{path.name}: its shared block differs from {spec.source.name}'s\n{diff}")
        if diffs:
            print(f"edit {spec.source.name}'s block and run: python lab/shared_code.py --write", file=sys.stderr)
            failed = True
        else:
            print(f"every copy of {spec.source.name}'s shared block ('{spec.begin}') agrees")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
