"""Replay bundles: one JSON file with everything needed to run an evaluation again (`--bundle PATH`),
and the replay (`--replay PATH`).

A bundle holds the submissions' and the task's files (their text and sha256: task.yml, its
reference, its companion task's), the flags that shape the evaluation (mode, budget, check, cases,
...) and the run's seed, the harness's version and commit, the software and GPU it ran on (driver,
clocks, the clock watch's line), the command line, and the results as --json writes them.

A bundle may be anyone's file: a replay treats it as untrusted input. Its submissions run as any do
(sandboxed), from their recorded paths where the same file is there (the database then files the
replay under the same submission), else from a private copy laid out as the originals were. A task is
code the parent runs outside any sandbox, so a replay runs only a task already here (the same files
at the recorded place, or one of this harness's tasks made of them), never the bundle's copy. A file
at a recorded path that differs (an edited submission, another task) refuses the replay in one line
naming it. The bundle decides what is evaluated (its flags parsed as if typed, and its seed); how and
where (--sandbox, --share, --gpus, --workers, --backend, --address) is the replaying command line's,
so a bundle cannot turn the sandbox off, show a worker more files or send work elsewhere (a note
names any that differ). The replay says, per case, whether the new median is the same as the bundled
one (their 95% intervals overlap), faster or slower, with the ratio, and whether every verdict is.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

if TYPE_CHECKING:
    from harness.config import RunConfig

FORMAT = "mla-eval replay bundle"
VERSION = 1
MAX_BYTES = 64 << 20  # a bundle larger than this is refused unread

# The flags that decide what is evaluated, which a bundle records and a replay restores: argparse dest ->
# the flag as typed.
EVALUATION_FLAGS = {
    "mode": "--mode", "device": "--device", "small": "--small", "check": "--check", "budget": "--budget",
    "graph": "--graph", "shape": "--shape", "timeout": "--timeout", "no_audit": "--no-audit", "energy": "--energy",
    "diagnostics": "--diagnostics",
}
# ... those that say how and where it ran, which a bundle records and a replay takes from its own command line
RUNNER_FLAGS = {"sandbox": "--sandbox", "share": "--share", "gpus": "--gpus", "workers": "--workers",
                "backend": "--backend", "address": "--address"}
# ... and those a replay takes from the bundle alone (given beside --replay: a usage error)
FROM_BUNDLE = {**EVALUATION_FLAGS, "submission": "--submission", "exclude": "--exclude", "task": "--task",
               "seed": "--seed", "baseline": "--baseline", "history": "--history", "compare": "--compare",
               "ncu": "--ncu", "rocprof": "--rocprof", "target": "--target"}


class BundleError(Exception):
    """A bundle that cannot be written, read or replayed here: one line."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _packed(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    try:
        body = {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        body = {"base64": base64.b64encode(data).decode("ascii")}
    return {"sha256": sha256(data), **body}


def _unpacked(entry: dict[str, Any]) -> bytes:
    return entry["text"].encode("utf-8") if "text" in entry else base64.b64decode(entry["base64"])


def task_files(task_path: Path) -> list[Path]:
    """The files a task is made of: its task.yml, its reference, and its companion task's (task.yml
    `companion`) with that one's reference."""
    from harness.task.problem import reference_path

    task_path = task_path.resolve()
    files = [task_path, reference_path(task_path)]
    try:
        import yaml

        companion = (yaml.safe_load(task_path.read_text()) or {}).get("companion")
    except Exception:  # noqa: BLE001 - the task loaded; a companion it cannot name is none
        companion = None
    if isinstance(companion, str) and companion:
        other = (task_path.parent / companion).resolve()
        if other.is_file():
            files += [other, reference_path(other)]
    return list(dict.fromkeys(f for f in files if f.is_file()))


def _described(task_path: Path) -> tuple[Path, str, list[str]]:
    """(the folder that holds all of a task's files, its task.yml's path below that folder, every file's)."""
    files = task_files(task_path)
    root = Path(os.path.commonpath([str(f.parent) for f in files]))
    return root, task_path.resolve().relative_to(root).as_posix(), [f.relative_to(root).as_posix() for f in files]


def _task_here(task: dict[str, Any], tasks: Sequence[Path]) -> Optional[Path]:
    """The task.yml of those in `tasks` made of exactly the bundled task's files, or None."""
    wanted = {entry["path"]: entry["sha256"] for entry in task["files"]}
    for candidate in tasks:
        try:
            root, main, files = _described(candidate)
            have = {path: sha256((root / path).read_bytes()) for path in files}
        except (OSError, ValueError):
            continue
        if main == task["main"] and have == wanted:
            return candidate
    return None


def harness_version() -> str:
    try:
        from importlib.metadata import version

        return version("mla-eval")
    except Exception:  # noqa: BLE001 - not installed: a checkout
        return "unknown (not installed)"


def build(config: RunConfig, submissions: Sequence[tuple[str, str, str]], results: dict[str, Any],
          environment: dict[str, Any]) -> dict[str, Any]:
    """The bundle of a finished run of `config` (harness/config.py RunConfig: its task, seed, flags and
    command line). `submissions`: (path, display name, sha256 the run evaluated); a file that changed
    since it was evaluated is refused (BundleError), so the bundle holds exactly what ran. `results`:
    report.json_document's."""
    from harness.report.store import git_commit

    packed = []
    for path, name, evaluated in submissions:
        entry = _packed(Path(path))
        if entry["sha256"] != evaluated:
            raise BundleError(f"--bundle: {path} changed after it was evaluated (sha256 {entry['sha256'][:12]}, "
                              f"evaluated {evaluated[:12]}): no bundle written")
        packed.append({"path": str(Path(path).resolve()), "name": name, **entry})
    task_path = Path(config.task)
    root, main, files = _described(task_path)
    flags = {dest: getattr(config, dest) for dest in (*EVALUATION_FLAGS, *RUNNER_FLAGS)}
    flags["shape"] = [",".join(f"{k}={v}" for k, v in case.items()) for case in (config.cases or [])]
    baseline = config.baseline
    return {
        "format": FORMAT, "version": VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": list(config.argv), "flags": flags, "seed": config.seed,
        "baseline": next((i for i, s in enumerate(packed) if baseline and Path(s["path"]) == Path(baseline).resolve()),
                         None),
        "harness": {"version": harness_version(), "git_commit": git_commit()},
        "environment": environment,
        "task": {"path": str(task_path.resolve()), "root": str(root), "main": main,
                 "files": [{"path": path, **_packed(root / path)} for path in files]},
        "submissions": packed,
        "results": results,
    }


def write(path: str | Path, bundle: dict[str, Any]) -> Path:
    out = Path(path)
    out.write_text(json.dumps(bundle, indent=1, default=str), encoding="utf-8")
    return out


def read(path: str | Path) -> dict[str, Any]:
    """A bundle, checked: its format, and every file's text against its recorded sha256."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise BundleError(f"--replay {path}: larger than {MAX_BYTES >> 20} MiB, not a bundle")
        bundle = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BundleError(f"--replay {path}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError):
        raise BundleError(f"--replay {path}: not a replay bundle (not JSON)") from None
    if not isinstance(bundle, dict) or bundle.get("format") != FORMAT:
        raise BundleError(f"--replay {path}: not a replay bundle (no \"format\": \"{FORMAT}\")")
    if bundle.get("version") != VERSION:
        raise BundleError(f"--replay {path}: bundle version {bundle.get('version')!r}; this harness reads {VERSION}")
    try:
        entries = [*bundle["task"]["files"], *bundle["submissions"]]
        for entry in entries:
            if sha256(_unpacked(entry)) != entry["sha256"]:
                raise BundleError(f"--replay {path}: its copy of {entry['path']} does not match its own sha256 "
                                  "(the bundle was edited)")
        problem = _malformed(bundle)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        raise BundleError(f"--replay {path}: malformed bundle ({problem})")
    return bundle


def _malformed(bundle: dict[str, Any]) -> Optional[str]:
    """What is wrong with a bundle's shape (its hashes checked), or None."""
    task, paths = bundle["task"], [entry["path"] for entry in bundle["task"]["files"]]
    if not isinstance(bundle["flags"], dict) or not isinstance(bundle["results"]["rows"], list):
        return "its flags or results are not a table"
    if type(bundle["seed"]) is not int:
        return f"seed {bundle['seed']!r} is not a whole number"
    unsafe = [p for p in paths if not isinstance(p, str) or Path(p).is_absolute() or ".." in Path(p).parts]
    if unsafe or task["main"] not in paths or not all(isinstance(e["path"], str) for e in bundle["submissions"]):
        return f"a task file's path is not one below the task's folder: {(unsafe or [task['main']])[0]!r}"
    return None


def _differs(recorded: Path, entry: dict[str, Any]) -> Optional[str]:
    """Why the file at `recorded` on this machine is not the bundle's copy, or None (also when absent)."""
    if not recorded.exists():
        return None
    try:
        here = sha256(recorded.read_bytes())
    except OSError as exc:
        return f"cannot be read here ({exc.strerror})"
    if here != entry["sha256"]:
        return f"differs from the bundle's copy (sha256 {here[:12]} here, {entry['sha256'][:12]} in the bundle)"
    return None


def materialize(bundle: dict[str, Any], workdir: Path, tasks: Sequence[Path] = ()) -> tuple[list[Path], Path, list[str]]:
    """(submission paths, task path, notes) to replay `bundle` with: each submission at its recorded path
    where it is there and the same, else the bundle's copy written under `workdir`; the task at its
    recorded place, else the one of `tasks` (this harness's, flags.local_tasks) with the same files,
    else none (BundleError: its code would run outside the sandbox). A recorded file that exists and differs refuses the replay
    (BundleError, one line naming it)."""
    task = bundle["task"]
    root = Path(task["root"])
    for entry in task["files"]:
        why = _differs(root / entry["path"], entry)
        if why:
            raise BundleError(f"replay refused: the task file {root / entry['path']} {why}")
    for entry in bundle["submissions"]:
        why = _differs(Path(entry["path"]), entry)
        if why:
            raise BundleError(f"replay refused: the submission {entry['path']} {why}")
    if all((root / e["path"]).exists() for e in task["files"]):
        task_path = root / task["main"]
        notes = [f"task {task_path} (as bundled)"]
    else:
        task_path = _task_here(task, tasks)
        if task_path is None:
            raise BundleError(f"replay refused: the bundle's task {task['path']} is not on this machine and none of "
                              "this harness's tasks has its files; a task's code runs outside the sandbox, so a "
                              "replay runs only a task that is here (put the same files at the recorded place)")
        notes = [f"task {task_path} (the same files as the bundle's {task['path']})"]
    paths, copied = [], 0
    for i, entry in enumerate(bundle["submissions"]):
        recorded = Path(entry["path"])
        if recorded.exists():
            paths.append(recorded)
            continue
        target = workdir / "submissions" / str(i) / _plain(recorded.parent.name) / _plain(recorded.name, "submission.py")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_unpacked(entry))
        paths.append(target)
        copied += 1
    notes.append(f"{len(paths) - copied} submission(s) at their recorded paths (the same files), "
                 f"{copied} from the bundle's copies")
    return paths, task_path, notes


def replay_args(bundle: dict[str, Any], args: Any, workdir: Path, parser: Callable[[], Any],
                tasks: Sequence[Path]) -> tuple[dict[str, Any], list[str]]:
    """The bundle's evaluation as values over the replay's own parsed `args` (argparse dest -> value:
    its flags, seed, files and baseline), and the lines that say what runs (`parser`: makes the command
    line's parser; `tasks`: materialize's). A flag that decides what is evaluated may be given beside
    --replay only with the bundle's own value, that is, where it differs from the command line's
    defaults (else BundleError names the first)."""
    defaults, recorded = parser().parse_args([]), {**bundle["flags"], "seed": bundle["seed"]}
    given = [flag for dest, flag in FROM_BUNDLE.items() if getattr(args, dest, None) != getattr(defaults, dest, None)
             and (dest not in recorded or getattr(args, dest) != recorded[dest])]
    if given:
        raise BundleError(f"--replay takes the run's flags from the bundle; {given[0]} does not go with it "
                          "(unless with the bundle's value)")
    paths, task_path, notes = materialize(bundle, workdir, tasks)
    index = bundle.get("baseline")
    values = _as_typed(bundle["flags"], parser())
    values.update(submission=[str(p) for p in paths], task=str(task_path), seed=bundle["seed"], exclude=[],
                  baseline=str(paths[index]) if type(index) is int and 0 <= index < len(paths) else None)
    for dest, flag in RUNNER_FLAGS.items():
        ran, here = bundle["flags"].get(dest), getattr(args, dest, None)
        if dest in bundle["flags"] and ran != here:
            notes.append(f"note: the bundled run had {flag} {_shown(ran)}; this replay: {_shown(here)} (how and "
                         "where a replay runs is its own command line's)")
    from harness.report.store import git_commit

    recorded, here = bundle["harness"].get("git_commit"), git_commit()
    if recorded != here:
        notes.append(f"note: the bundle was made by harness commit {recorded or '?'}, this is {here or '?'}")
    return values, notes


def _as_typed(flags: dict[str, Any], parser: Any) -> dict[str, Any]:
    """The bundle's evaluation flags (argparse dest -> value) parsed by the command line's `parser` as if
    typed, so that a value it would refuse is refused here (BundleError), not met deep in the run."""
    tokens = []
    for dest, flag in EVALUATION_FLAGS.items():
        value = flags.get(dest)
        if value is True:
            tokens.append(flag)
        elif isinstance(value, list):
            tokens += [part for item in value for part in (flag, str(item))]
        elif value is not None and value is not False:
            tokens += [flag, str(value)]

    def refuse(message: str) -> None:
        raise BundleError(f"--replay: the bundle's flags are not valid: {message}")

    parser.error = refuse  # (argparse reports through this method; its own prints and exits)
    parsed = parser.parse_args(tokens)
    return {dest: getattr(parsed, dest) for dest in EVALUATION_FLAGS}


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value)) or "none"
    return "none" if value is None else str(value)


def _plain(name: str, instead: str = "folder") -> str:
    """`name` as one plain path component (a bundle's recorded names place its copies under the replay's
    folder and nowhere else)."""
    return name if name and name not in (".", "..") and Path(name).name == name else instead


def workdir() -> Path:
    """A private folder for a replay's copies of the bundled files (removed when the process ends)."""
    import atexit

    folder = Path(tempfile.mkdtemp(prefix="mla-replay-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


# ---------------------------------------------------------------- the comparison
def comparison(bundled: Sequence[dict[str, Any]], replayed: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (submission, case) of the bundled results' rows (report.export_rows): the bundled and the
    replayed verdict and, for timed cases in both, the medians, their ratio and the mark (same,
    faster, slower, too noisy: report.compare_marks, the 95% intervals of the medians)."""
    from harness.report import compare_marks

    new = {(r["submission"], r["kind"], r["case"]): r for r in replayed}
    out = []
    for old in bundled:
        key = (old["submission"], old["kind"], old["case"])
        now = new.get(key)
        row = {"submission": old["submission"], "kind": old["kind"], "case": old["case"],
               "was": _verdict(old), "now": _verdict(now) if now else "missing"}
        if now and old.get("sha256") and now.get("sha256") != old["sha256"]:  # (changed after it was checked)
            row["now"] += f" of another file (sha256 {str(now.get('sha256'))[:12]})"
        if now and old.get("median_us") and now.get("median_us"):
            row.update(a_us=old["median_us"], b_us=now["median_us"], ratio=now["median_us"] / old["median_us"],
                       mark=compare_marks(old["median_us"], old.get("ci95_rel"), now["median_us"], now.get("ci95_rel")))
        out.append(row)
    return out


def _verdict(row: dict[str, Any]) -> str:
    if row.get("kind") is None:
        return "pass" if row.get("passed") else "FAIL"
    return "pass" if row.get("case_ok") else "FAIL"


def summary(rows: Sequence[dict[str, Any]]) -> tuple[str, bool]:
    """One line on a replay's comparison, and whether every verdict was the same."""
    marks = [r["mark"] for r in rows if "mark" in r]
    changed = [r for r in rows if r["was"] != r["now"]]
    counts = ", ".join(f"{marks.count(m)} {m}" for m in ("same", "faster", "slower", "too noisy") if marks.count(m))
    verdicts = (f"verdicts: all {len(rows)} the same" if not changed else
                f"verdicts: {len(changed)} of {len(rows)} changed (first: {changed[0]['submission']} "
                f"{changed[0]['kind'] or ''} {changed[0]['case'] or ''}: {changed[0]['was']} -> {changed[0]['now']})")
    return f"replay: {len(marks)} timed case(s): {counts or 'none'}; {verdicts}", not changed


def environment(device: Any, watch: Any, clocks: Optional[str]) -> dict[str, Any]:
    """The software and GPU a run used, for its bundle."""
    import platform

    from harness.device import versions

    return {**versions(), "platform": platform.platform(), "device": device.describe(), "executable": sys.executable,
            **(watch.facts() if watch is not None else {}), "clocks": clocks}
