"""Which submission files a run evaluates: --submission paths and patterns, --exclude, each file
checked (a regular file the parent can read safely, a name the report can show) before anything runs."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Sequence

from harness.config import UsageError
from harness.cli.flags import REPO_ROOT
from harness.parent.scan import SourceError, read_source


GLOB_CHARACTERS = "*?["


def resolve_submissions(paths: Sequence[str], exclude: Sequence[str] = ()) -> list[Path]:
    """The files to evaluate, checked: each exists and is a .py file whose path can be shown and
    stored as it is. `paths`: files, or glob patterns (a path that exists is a file, whatever its
    characters); default submissions/*.py. A file whose name starts with _ (a helper module) is left
    out of the default and of a pattern whose own file name does not start with _. `exclude`: glob
    patterns of the files to leave out (`_excluded`); one that matches none is an error."""
    if not paths:
        folder = Path("submissions") if Path("submissions").is_dir() else REPO_ROOT / "submissions"
        found = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
        if not found:
            raise UsageError(f"{folder}: no submissions (*.py) found; pass --submission PATH")
        return _without([_checked_file(str(p), Path(_showable(p))) for p in found], exclude)
    out: list[Path] = []
    for raw in paths:
        if not Path(raw).exists() and any(c in raw for c in GLOB_CHARACTERS):
            found = [Path(p) for p in sorted(glob.glob(raw, recursive=True)) if p.endswith(".py")]
            found = [p for p in found if not p.name.startswith("_") or Path(raw).name.startswith("_")]
            if not found:
                raise UsageError(f"--submission {raw}: no .py file matches this pattern")
            checked = [_checked_file(str(p), Path(_showable(p))) for p in found]
            out += [p for p in checked if p not in out]  # (two patterns may match one file)
            continue
        path = Path(_showable(Path(raw)))
        if not path.exists():
            raise UsageError(f"{raw}: submission file not found")
        out.append(_checked_file(raw, path))
    return _without(out, exclude)


def _without(files: list[Path], patterns: Sequence[str]) -> list[Path]:
    """`files` less those an --exclude pattern matches; a pattern that matches none, or leaving no
    file, is an error."""
    for pattern in patterns:
        matched = [p for p in files if _excluded(p, pattern)]
        if not matched:
            raise UsageError(f"--exclude {pattern}: matches none of the {len(files)} submission(s)")
        files = [p for p in files if p not in matched]
    if not files:
        raise UsageError(f"--exclude {' '.join(patterns)}: leaves no submission to evaluate")
    return files


def _excluded(path: Path, pattern: str) -> bool:
    """Whether glob `pattern` matches the submission at `path` (absolute): a relative pattern
    against its last parts (its file name, or submissions/NAME) or as a path from the working
    folder (../other/*.py); an absolute one against the whole path."""
    try:
        return path.match(pattern) or path.match(os.path.abspath(pattern))
    except ValueError:  # ('', '.')
        raise UsageError(f"--exclude {pattern!r}: not a file pattern") from None


def _checked_file(raw: str, path: Path) -> Path:
    """`path` resolved, if it is a submission the parent will read: a .py regular file of at most
    scan.MAX_SOURCE_BYTES (harness/parent/scan.py, read_source), not a link (the sandbox hides the other
    files of a submission's own folder, and a link's file lives in another one)."""
    if path.is_symlink():
        raise UsageError(f"{raw}: is a symbolic link; pass the file it points to")
    if path.is_dir():
        raise UsageError(f"{raw}: is a folder; pass a .py file")
    if path.suffix != ".py":
        raise UsageError(f"{raw}: not a Python file (expected a .py submission)")
    try:
        read_source(path)
    except SourceError as e:
        raise UsageError(f"{raw}: {e}") from None
    return _showable(path.resolve())


MARKUP_CHARACTERS = "[]$"


def _showable(path: Path) -> Path:
    """`path`, if every character of it can be printed, stored and exported as it is: a file name
    is the submitter's choice, and one with terminal escapes, line breaks or bytes that are not
    UTF-8 would reach the report, the database and the exports."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{ascii(text)}: path not valid UTF-8; rename the file") from None
    if not text.isprintable():
        raise UsageError(f"{ascii(text)}: path holds control characters; rename the file") from None
    markup = sorted(set(text) & set(MARKUP_CHARACTERS))
    if markup:  # rich's markup ([link=...], [/x]) in the terminal, matplotlib's mathtext ($...$) in the plots
        raise UsageError(f"{text}: path holds {' '.join(markup)}, which the reports would read as markup; "
                         "rename the file or its folder")
    return path

