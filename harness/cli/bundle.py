"""Replay bundles: one JSON file with everything needed to run an evaluation again (`--bundle PATH`),
and the replay (`--replay PATH`).

A bundle holds the submissions' and the task's files (their text and sha256: task.yml, its
reference, its companion task's), the flags that shape the evaluation (mode, budget, check, cases,
...) and the run's seed, the harness's version and commit, the software and GPU it ran on (driver,
clocks, the clock watch's line), the command line, and the results as --json writes them.

A replay runs the bundle's own copies of the files, so the bundle alone is enough on another
machine; but where a file exists at the path the bundle recorded, it must be the bundled one: one
that differs (an edited submission, another task) refuses the replay in one line naming it, rather
than leave anyone believing they replayed their edited file. Files at their recorded paths are run
from there (the database then files the replay under the same submission); missing ones from a
private temporary copy laid out as the originals were. The replay uses the bundle's seed and flags
and says, per case, whether the new median is the same as the bundled one (their 95% intervals
overlap), faster or slower, with the ratio, and whether every verdict is the same.
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
from typing import TYPE_CHECKING, Any, Optional, Sequence

if TYPE_CHECKING:
    from harness.config import RunConfig

FORMAT = "mla-eval replay bundle"
VERSION = 1
MAX_BYTES = 64 << 20  # a bundle larger than this is refused unread

# The flags a bundle records and a replay restores: argparse dest -> the flag as typed.
EVALUATION_FLAGS = {
    "mode": "--mode", "device": "--device", "small": "--small", "check": "--check", "budget": "--budget",
    "graph": "--graph", "shape": "--shape", "timeout": "--timeout", "no_audit": "--no-audit", "energy": "--energy",
    "diagnostics": "--diagnostics",
    "sandbox": "--sandbox", "share": "--share", "gpus": "--gpus", "workers": "--workers", "backend": "--backend",
    "address": "--address",
}
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
    files = task_files(task_path)
    root = Path(os.path.commonpath([str(f.parent) for f in files]))
    flags = {dest: getattr(config, dest) for dest in EVALUATION_FLAGS}
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
        "task": {"path": str(task_path.resolve()), "root": str(root),
                 "main": task_path.resolve().relative_to(root).as_posix(),
                 "files": [{"path": f.relative_to(root).as_posix(), **_packed(f)} for f in files]},
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
        bundle["flags"], bundle["results"]["rows"]  # noqa: B018 - present
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"--replay {path}: malformed bundle ({type(exc).__name__}: {exc})") from None
    return bundle


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


def materialize(bundle: dict[str, Any], workdir: Path) -> tuple[list[Path], Path, list[str]]:
    """(submission paths, task path, notes) to replay `bundle` with: each file at its recorded path
    where it is there and the same, else the bundle's copy written under `workdir`. A recorded file
    that exists and differs refuses the replay (BundleError, one line naming it)."""
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
    notes = []
    if all((root / e["path"]).exists() for e in task["files"]):
        task_path = root / task["main"]
        notes.append(f"task {task_path} (as bundled)")
    else:
        for entry in task["files"]:
            target = workdir / "task" / entry["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(_unpacked(entry))
        task_path = workdir / "task" / task["main"]
        notes.append(f"task {task['path']}: the bundle's copy")
    paths, copied = [], 0
    for i, entry in enumerate(bundle["submissions"]):
        recorded = Path(entry["path"])
        if recorded.exists():
            paths.append(recorded)
            continue
        target = workdir / "submissions" / str(i) / recorded.parent.name / recorded.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_unpacked(entry))
        paths.append(target)
        copied += 1
    notes.append(f"{len(paths) - copied} submission(s) at their recorded paths (the same files), "
                 f"{copied} from the bundle's copies")
    return paths, task_path, notes


def replay_args(bundle: dict[str, Any], args: Any, workdir: Path, defaults: Any) -> tuple[dict[str, Any], list[str]]:
    """The bundle's evaluation as values over the replay's own parsed `args` (argparse dest -> value:
    its flags, seed, files and baseline), and the lines that say what runs. A flag that decides what is
    evaluated may be given beside --replay only with the bundle's own value, that is, where it differs
    from `defaults` (the command line's own defaults; else BundleError names the first)."""
    recorded = {**bundle["flags"], "seed": bundle["seed"]}
    given = [flag for dest, flag in FROM_BUNDLE.items() if getattr(args, dest, None) != getattr(defaults, dest, None)
             and (dest not in recorded or getattr(args, dest) != recorded[dest])]
    if given:
        raise BundleError(f"--replay takes the run's flags from the bundle; {given[0]} does not go with it "
                          "(unless with the bundle's value)")
    paths, task_path, notes = materialize(bundle, workdir)
    index = bundle.get("baseline")
    values = {dest: value for dest, value in bundle["flags"].items() if dest in EVALUATION_FLAGS}
    values.update(shape=list(bundle["flags"].get("shape") or []), submission=[str(p) for p in paths],
                  task=str(task_path), seed=bundle["seed"], exclude=[],
                  baseline=str(paths[index]) if isinstance(index, int) and 0 <= index < len(paths) else None)
    from harness.report.store import git_commit

    recorded, here = bundle["harness"].get("git_commit"), git_commit()
    if recorded != here:
        notes.append(f"note: the bundle was made by harness commit {recorded or '?'}, this is {here or '?'}")
    return values, notes


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
