"""A submission file as the parent reads it: a regular file of bounded size, never a link, a pipe or
a device (`read_source`), and the KV format it declares (`declared_variant`)."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path
from typing import Optional

MAX_SOURCE_BYTES = 512 * 1024  # a submission's source; the largest bundled file is ~30 KB


class SourceError(Exception):
    """A file the parent will not read (a submission, a popcorn TESTFILE): not a regular file, or too large."""


def read_source(path: Path, limit: int = MAX_SOURCE_BYTES, what: str = "a submission") -> bytes:
    """A submission's bytes, as the parent reads them (to check, hash and parse them), read only
    from a regular file of at most `limit` bytes: the submitter chooses the file, and a named pipe
    would block the parent for good, a link to a device (/dev/zero) would fill its memory, and the
    parser's memory grows with the source (up to ~1 GB per MB: one name per line). Also for the
    other files a run reads that someone else may hand over (a popcorn TESTFILE). Raises
    SourceError with the reason."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        raise SourceError(f"cannot be read ({e.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SourceError("is not a regular file (a pipe, device or socket)")
        if info.st_size > limit:
            raise SourceError(f"is {info.st_size:,} bytes, over the {limit:,} {what} may have")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise SourceError(f"grew past the {limit:,} bytes {what} may have")
        return data
    finally:
        os.close(fd)


def declared_variant(path: Path, variants: list[str], source: Optional[bytes] = None) -> str:
    """Which input variant (for this task: the KV format) a submission reads, from its source,
    without running it: a top-level `KV_FORMAT = "fp8"` (or `"mxfp4+fp8"` for a file that reads
    two) if present, else the variants named in subscripts such as `kv_data["fp8"]` when one or
    two are (two joined by "+", in the task's order), else the first variant (the widest); "" for
    a task without variants. `source`: the file's bytes, if the caller read them already."""
    if not variants:
        return ""
    try:  # the bytes, as Python reads a source file (its coding line, a byte-order mark)
        tree = ast.parse(read_source(path) if source is None else source)
    except (SourceError, SyntaxError, ValueError, RecursionError, MemoryError):  # (too deep: RecursionError)
        return variants[0]
    declared = None
    for node in tree.body:  # the last top-level assignment counts, as when Python runs the file
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "KV_FORMAT" for t in targets):
            value = node.value
            declared = value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else ""
    if declared is not None:
        named = declared.split("+")
        if 1 <= len(named) <= 2 and all(v in variants for v in named):
            return "+".join(v for v in variants if v in named)
    used = {n.slice.value for n in ast.walk(tree)
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value in variants}
    return "+".join(v for v in variants if v in used) if 1 <= len(used) <= 2 else variants[0]


# kernelguard's time grows with the square of a long literal or comment (a 40 KB string literal
# kept it busy 69 s on the CPU machine): it runs in a child process, ended past this many seconds,
# and files larger than SCAN_MAX_BYTES are not handed to it at all.
