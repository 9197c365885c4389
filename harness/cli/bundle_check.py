"""Reading a replay bundle (`--replay PATH`), which may be anyone's file: everything in it is checked
before anything runs, and what cannot be trusted is refused in one line.

- The file: a regular file of at most MAX_BYTES, JSON (NaN and infinities read as missing values),
  this harness's format and version; every file it holds matches its own sha256.
- Its shape: every field of the type the replay uses (flags a table, the seed a whole number, one to
  MAX_SUBMISSIONS submissions, at most MAX_SHAPES --shape cases, each result row a table with its
  labels short and its numbers finite), task files named by paths below the task's folder.
- Its text: every string it holds but the files' own text is printable (no control character, no
  escape sequence, no bidirectional override), since names, cases, paths and notes reach the terminal.
- Its flags: those that decide what is evaluated, parsed by the command line's own parser as if typed
  `--flag=value` (a value cannot become a flag of its own), in a mode a bundle is written for.
- A file at a path it recorded: read only if it is a regular file of a bundle's size at most.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, Optional

FORMAT = "mla-eval replay bundle"
VERSION = 1
MAX_BYTES = 64 << 20  # a bundle larger than this is refused unread
MAX_SUBMISSIONS = 256
MAX_SHAPES = 64   # --shape cases a bundle may ask for
MAX_LABEL = 200   # characters of a result row's submission, case or kind (a label, not a page of text)
MAX_SHAPE_TEXT = 4096  # characters of one --shape case (a ragged batch of 256 lengths fits)
MIN_MEDIAN_US = 0.1  # below any median the harness writes (a bundle's claim under it is not one of its rows)
REPLAYABLE_MODES = ("test", "benchmark", "leaderboard")  # the modes --bundle writes a bundle for
_NUMBERS = ("median_us", "ci95_rel", "mean_us", "min_us", "max_us", "std_us")


class BundleError(Exception):
    """A bundle that cannot be written, read or replayed here: one line."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def unpacked(entry: dict[str, Any]) -> bytes:
    return entry["text"].encode("utf-8") if "text" in entry else base64.b64decode(entry["base64"], validate=True)


def read(path: str | Path) -> dict[str, Any]:
    """A bundle, checked (the module's list); BundleError naming the first problem."""
    path = Path(path)
    why = regular_file(path)
    if why:
        raise BundleError(f"--replay {path}: {why}")
    try:
        with open(path, "rb", buffering=0, opener=_nonblocking) as handle:
            raw = handle.read(MAX_BYTES + 1)  # (a /proc file reports size 0 and may never end)
        if len(raw) > MAX_BYTES:
            raise BundleError(f"--replay {path}: is larger than {MAX_BYTES >> 20} MiB")
        bundle = json.loads(raw.decode("utf-8"), parse_constant=lambda _: None)
    except OSError as exc:
        raise BundleError(f"--replay {path}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BundleError(f"--replay {path}: not a replay bundle (not JSON, or nested too deep)") from None
    if not isinstance(bundle, dict) or bundle.get("format") != FORMAT:
        raise BundleError(f"--replay {path}: not a replay bundle (no \"format\": \"{FORMAT}\")")
    if bundle.get("version") != VERSION:
        raise BundleError(f"--replay {path}: bundle version {ascii(bundle.get('version'))[:40]}; this harness reads "
                          f"{VERSION}")
    try:
        problem = _malformed(bundle) or _edited(bundle)
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        problem = f"{type(exc).__name__} {ascii(str(exc))[:80]}"
    if problem:
        raise BundleError(f"--replay {path}: malformed bundle ({problem})")
    return bundle


def _malformed(bundle: dict[str, Any]) -> Optional[str]:
    """What is wrong with a bundle's shape or text, or None."""
    task, subs, rows = bundle["task"], bundle["submissions"], bundle["results"]["rows"]
    if not all(isinstance(v, dict) for v in (bundle["flags"], bundle["harness"], task)):
        return "its flags, harness or task is not a table"
    if type(bundle["seed"]) is not int:
        return f"seed {ascii(bundle['seed'])[:40]} is not a whole number"
    if not isinstance(subs, list) or not 0 < len(subs) <= MAX_SUBMISSIONS:
        return f"it must hold 1 to {MAX_SUBMISSIONS} submissions"
    files = task["files"]
    if not isinstance(files, list) or not files or not isinstance(rows, list):
        return "its task files or result rows are not a list"
    for entry in (*files, *subs):
        if not (isinstance(entry, dict) and isinstance(entry["path"], str) and isinstance(entry["sha256"], str)
                and isinstance(entry.get("text", entry.get("base64")), str)
                and isinstance(entry.get("name", ""), str) and len(entry.get("name", "")) <= MAX_LABEL):
            return "a file entry is not a path, a sha256 and a text"
    paths = [entry["path"] for entry in files]
    unsafe = [p for p in paths if Path(p).is_absolute() or ".." in Path(p).parts]
    shapes = bundle["flags"].get("shape") or ()
    if len(shapes) > MAX_SHAPES or any(len(str(shape)) > MAX_SHAPE_TEXT for shape in shapes):
        return f"it asks for more than {MAX_SHAPES} --shape cases, or one longer than {MAX_SHAPE_TEXT} characters"
    commit = bundle["harness"].get("git_commit")
    if not (commit is None or re.fullmatch(r"([0-9a-f]{4,40}(\+dirty)?)?", str(commit))):
        return "its harness commit is not a git commit"
    if unsafe or task["main"] not in paths or not isinstance(task["root"], str) or not isinstance(task["path"], str):
        return f"a task file's path is not one below the task's folder: {ascii((unsafe or [task['main']])[0])[:80]}"
    bad_row = next((row for row in rows if not _row_ok(row)), None)
    if bad_row is not None:
        return f"a result row is not one this harness writes: {ascii(bad_row)[:80]}"
    where = _unprintable({**bundle, "task": {**task, "files": [_meta(e) for e in files]},
                          "submissions": [_meta(e) for e in subs]})
    return f"a string in {where} holds a control or formatting character" if where else None


def _meta(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("text", "base64")}


def _row_ok(row: Any) -> bool:
    if not isinstance(row, dict) or not isinstance(row.get("submission"), str) or not {"kind", "case"} <= row.keys():
        return False
    if not all(row.get(k) is None or (isinstance(row[k], str) and len(row[k]) <= MAX_LABEL)
               for k in ("submission", "kind", "case", "sha256")):
        return False
    if row.get("median_us") is not None and not (type(row["median_us"]) in (int, float)
                                                 and row["median_us"] >= MIN_MEDIAN_US):
        return False
    return all(row.get(k) is None or (type(row[k]) in (int, float) and math.isfinite(row[k]) and row[k] >= 0)
               for k in _NUMBERS)


def _unprintable(value: Any) -> Optional[str]:
    """The first key under which a string (or a key) in `value` is not printable, or None."""
    stack = [("the bundle", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str) and not item.isprintable():
            return where
        if isinstance(item, dict):
            for key, inner in item.items():
                if not key.isprintable():
                    return where
                stack.append((ascii(key), inner))
        elif isinstance(item, list):
            stack.extend((where, inner) for inner in item)
    return None


def _edited(bundle: dict[str, Any]) -> Optional[str]:
    for entry in (*bundle["task"]["files"], *bundle["submissions"]):
        if sha256(unpacked(entry)) != entry["sha256"]:
            return f"its copy of {entry['path']} does not match its own sha256: the bundle was edited"
    return None


def same_file(path: Path, data: bytes) -> Optional[str]:
    """Why the file at `path` is not the bundle's copy `data`, or None (also when there is none): read
    only where it is a regular file of exactly that size, and no further (a /proc file reports size 0
    and may never end)."""
    why = regular_file(path)
    if why is None:
        try:
            with open(path, "rb", buffering=0, opener=_nonblocking) as handle:
                same = os.fstat(handle.fileno()).st_size == len(data) and handle.read(len(data) + 1) == data
        except OSError as exc:
            return f"cannot be read here ({exc.strerror or exc})"
        why = None if same else f"differs from the bundle's copy (sha256 {sha256(data)[:12]} in the bundle)"
    return why or None


def _nonblocking(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NONBLOCK)


def regular_file(path: Path) -> Optional[str]:
    """Why `path` is not a file the harness may read whole here (a bundle, or a file a bundle names),
    None if it is one, "" if there is none."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"cannot be read here ({exc.strerror or exc})"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    return f"is larger than {MAX_BYTES >> 20} MiB" if info.st_size > MAX_BYTES else None


def as_typed(flags: dict[str, Any], names: dict[str, str], parser: Any) -> dict[str, Any]:
    """The bundle's flags `names` (argparse dest -> flag) parsed by the command line's `parser` as if
    typed `--flag=value` (a flag without a value only for True), so that a value the command line
    refuses is refused here, before anything runs (BundleError)."""
    def refuse(message: Any = "a flag asks for help", *_: Any) -> None:
        raise BundleError(f"--replay: the bundle's flags are not valid: {message}")

    tokens = []
    for dest, flag in names.items():
        value = flags.get(dest)
        items = value if isinstance(value, list) else [] if value is None or value is False else [value]
        if value is True and parser.get_default(dest) is False:
            tokens.append(flag)
        elif any(type(item) not in (str, int, float) for item in items):
            refuse(f"{flag} {ascii(value)[:40]}")
        else:
            tokens += [f"{flag}={item}" for item in items]
    parser.error = parser.exit = refuse  # (argparse reports through these; its own print and exit)
    parsed = parser.parse_args(tokens)
    if parsed.mode not in REPLAYABLE_MODES:
        refuse(f"--mode {parsed.mode} (a replay runs {', '.join(REPLAYABLE_MODES)})")
    return {dest: getattr(parsed, dest) for dest in names}
