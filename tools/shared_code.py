"""The code the three bundled Triton kernels share (split combine, launch plan, direct launch).

Each kernel must stay a single file that drops into a competition unchanged, so the shared code is
copied into every file between two marks; triton_bf16.py holds the source of truth.

    python tools/shared_code.py           # exit 1, naming each file whose copy differs
    python tools/shared_code.py --write   # copy triton_bf16.py's block into the other files

tests/test_shared_code.py runs the check in CI.
"""

import argparse
import difflib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "submissions" / "triton_bf16.py"
COPIES = (ROOT / "submissions" / "triton_fp8.py", ROOT / "submissions" / "triton_mxfp4.py")
BEGIN = "# ==== shared code:"
END = "# ==== end of shared code ===="


class SharedCodeError(ValueError):
    """A file without exactly one well-formed shared block."""


def block_span(text: str, path: Path) -> tuple[int, int]:
    """(start, end) of the shared block in `text`, both marks included."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise SharedCodeError(f"{path}: needs exactly one '{BEGIN}' and one '{END}' line")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    if end < start:
        raise SharedCodeError(f"{path}: the end mark comes before the start mark")
    return start, end


def block(path: Path) -> str:
    text = path.read_text()
    start, end = block_span(text, path)
    return text[start:end]


def differences(source: Path = SOURCE, copies: tuple[Path, ...] = COPIES) -> dict[Path, str]:
    """{copy: unified diff against the source's block} for each copy whose block differs."""
    want = block(source)
    out = {}
    for path in copies:
        have = block(path)
        if have != want:
            out[path] = "".join(difflib.unified_diff(want.splitlines(True), have.splitlines(True),
                                                     str(source.name), str(path.name)))
    return out


def write(source: Path = SOURCE, copies: tuple[Path, ...] = COPIES) -> list[Path]:
    """Copy the source's block into each copy; the files changed."""
    want = block(source)
    changed = []
    for path in copies:
        text = path.read_text()
        start, end = block_span(text, path)
        if text[start:end] != want:
            path.write_text(text[:start] + want + text[end:])
            changed.append(path)
    return changed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="copy triton_bf16.py's block into the other files")
    args = parser.parse_args(argv)
    try:
        if args.write:
            changed = write()
            print("updated: " + ", ".join(p.name for p in changed) if changed else "every copy already agrees")
            return 0
        diffs = differences()
    except (SharedCodeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path, diff in diffs.items():
        print(f"{path.name}: its shared block differs from {SOURCE.name}'s\n{diff}")
    if diffs:
        print(f"edit {SOURCE.name}'s block and run: python tools/shared_code.py --write", file=sys.stderr)
        return 1
    print("every copy of the shared code agrees with " + SOURCE.name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
