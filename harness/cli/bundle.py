"""Replay bundles: one JSON file with everything needed to run an evaluation again (`--bundle PATH`),
and the replay (`--replay PATH`).

A bundle holds the submissions' and the task's files (their text and sha256: task.yml, its
reference, its companion task's), the flags that shape the evaluation (mode, budget, check, cases,
...) and the run's seed, the harness's version and commit, the software and GPU it ran on (driver,
clocks, the clock watch's line), the command line, and the results as --json writes them.

A bundle may be anyone's file: a replay treats it as untrusted input, checked whole before anything
runs (harness/cli/bundle_check.py). Its submissions run as any do (sandboxed), from their recorded
paths where the same file is there (the database then files the replay under the same submission),
else from a private copy laid out as the originals were. A task is code the parent runs outside any
sandbox, so a replay runs only a task already here, made of exactly the bundled task's files (at the
recorded place, or one of this harness's tasks), never the bundle's copy. A file at a recorded path
that differs (an edited submission, another task) refuses the replay in one line naming it. The
bundle decides what is evaluated (its flags parsed as if typed, and its seed); how and where
(--sandbox, --share, --gpus, --workers, --backend, --address, --no-audit) is the replaying command
line's, so a bundle cannot turn the sandbox or the outside timing off, show a worker more files or
send work elsewhere (a note names any that differ). The replay says, per case, whether the new median
is the same as the bundled one (judged by the replay's own interval), faster or slower, with the
ratio, and whether every verdict is the same (a case the bundle lacks is a change).
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from harness.cli.bundle_check import (  # noqa: F401 - read: this module's API too
    FORMAT, VERSION, BundleError, as_typed, read, same_file, sha256, unpacked)

if TYPE_CHECKING:
    from harness.config import RunConfig

# The flags that decide what is evaluated, which a bundle records and a replay restores: argparse dest ->
# the flag as typed.
EVALUATION_FLAGS = {
    "mode": "--mode", "device": "--device", "small": "--small", "check": "--check", "budget": "--budget",
    "graph": "--graph", "shape": "--shape", "timeout": "--timeout", "energy": "--energy",
    "diagnostics": "--diagnostics",
}
# ... those that say how and where it ran, which a bundle records and a replay takes from its own command line
RUNNER_FLAGS = {"sandbox": "--sandbox", "share": "--share", "gpus": "--gpus", "workers": "--workers",
                "backend": "--backend", "address": "--address", "no_audit": "--no-audit"}
# ... and those a replay takes from the bundle alone (given beside --replay: a usage error)
FROM_BUNDLE = {**EVALUATION_FLAGS, "submission": "--submission", "exclude": "--exclude", "task": "--task",
               "seed": "--seed", "baseline": "--baseline", "history": "--history", "compare": "--compare",
               "ncu": "--ncu", "rocprof": "--rocprof", "target": "--target"}


def _packed(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    try:
        body = {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        body = {"base64": base64.b64encode(data).decode("ascii")}
    return {"sha256": sha256(data), **body}


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


def materialize(bundle: dict[str, Any], workdir: Path,
                tasks: Sequence[Path] = ()) -> tuple[list[Path], Path, list[str]]:
    """(submission paths, task path, notes) to replay `bundle` with: each submission at its recorded path
    where it is there and the same, else the bundle's copy written under `workdir`; the task where it
    is made of exactly the bundle's task files, at its recorded place or among `tasks` (this harness's,
    flags.local_tasks), else none (BundleError: a task's code runs outside the sandbox). A recorded file
    that exists and differs refuses the replay (BundleError, one line naming it)."""
    task = bundle["task"]
    root = Path(task["root"])
    for entry in task["files"]:
        why = same_file(root / entry["path"], unpacked(entry))
        if why:
            raise BundleError(f"replay refused: the task file {root / entry['path']} {why}")
    for entry in bundle["submissions"]:
        why = same_file(Path(entry["path"]), unpacked(entry))
        if why:
            raise BundleError(f"replay refused: the submission {entry['path']} {why}")
    recorded = root / task["main"]
    task_path = _task_here(task, [recorded, *tasks] if recorded.is_file() else tasks)
    if task_path is None:
        raise BundleError(f"replay refused: the bundle's task {task['path']} is not on this machine made of the same "
                          "files, nor is any of this harness's tasks; a task's code runs outside the sandbox, so a "
                          "replay runs only a task that is here (put the same files at the recorded place)")
    notes = [f"task {task_path} (as bundled)" if task_path == recorded else
             f"task {task_path} (the same files as the bundle's {task['path']})"]
    paths, copied = [], 0
    for i, entry in enumerate(bundle["submissions"]):
        if Path(entry["path"]).is_file():
            paths.append(Path(entry["path"]))
            continue
        target = workdir / "submissions" / str(i) / _plain(Path(entry["path"]).parent.name) / _plain(
            Path(entry["path"]).name, "submission.py")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(unpacked(entry))
        except OSError as exc:
            raise BundleError(f"replay: cannot write the bundle's copy of {entry['path']} ({exc.strerror})") from None
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
    values = as_typed(bundle["flags"], EVALUATION_FLAGS, parser())
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


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value)) or "none"
    return "none" if value is None else str(value)


def _plain(name: str, instead: str = "folder") -> str:
    """`name` as one plain path component (a bundle's recorded names place its copies under the replay's
    folder and nowhere else)."""
    plain = name and name not in (".", "..") and Path(name).name == name and len(name.encode()) <= 200
    return name if plain else instead


def workdir() -> Path:
    """A private folder for a replay's copies of the bundled files (removed when the process ends)."""
    import atexit

    folder = Path(tempfile.mkdtemp(prefix="mla-replay-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


# ---------------------------------------------------------------- the comparison
def comparison(bundled: Sequence[dict[str, Any]], replayed: Sequence[dict[str, Any]],
               shas: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Per (submission, case) of the bundled results' rows (report.export_rows), in order (rows of one
    label are paired by their order, so none hides another): the bundled and the replayed verdict, a
    file whose sha256 is not the bundle's (`shas`) a change, and for timed cases in both the medians,
    their ratio and the mark (same, faster, slower, too noisy: report.compare_marks), judged by the
    replay's own 95% interval on both sides (a bundle's interval is its claim, not trusted); then each
    replayed row the bundle has none for ("absent": a changed verdict)."""
    from harness.report import compare_marks

    new: dict[tuple, list[dict[str, Any]]] = {}
    for r in replayed:
        new.setdefault((r["submission"], r["kind"], r["case"]), []).append(r)
    out = []
    for old in bundled:
        found = new.get((old["submission"], old["kind"], old["case"]))
        now = found.pop(0) if found else None
        row = {"submission": old["submission"], "kind": old["kind"], "case": old["case"],
               "was": _verdict(old), "now": _verdict(now) if now else "missing"}
        if now and ((shas and now.get("sha256") not in shas)
                    or (old.get("sha256") and now.get("sha256") != old["sha256"])):
            row["now"] += f" of another file (sha256 {str(now.get('sha256'))[:12]})"
        if now and old.get("median_us") and now.get("median_us"):
            ci = now.get("ci95_rel")
            row.update(a_us=old["median_us"], b_us=now["median_us"], ratio=now["median_us"] / old["median_us"],
                       mark=compare_marks(old["median_us"], ci, now["median_us"], ci))
        out.append(row)
    out += [{"submission": r["submission"], "kind": r["kind"], "case": r["case"], "was": "absent", "now": _verdict(r)}
            for rows in new.values() for r in rows]
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
