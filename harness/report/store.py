"""Every run, in an embedded SQLite database (only the trusted parent writes it).

A run row is written first with status 'running'; each submission's results go in one
transaction; the run is marked 'complete' at the end. A crash leaves a run marked 'running' with
only whole submissions in it, never a half-written one, and history shows complete runs only.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import sqlite3
import statistics
import subprocess
from pathlib import Path
from typing import Any, Callable, Optional

from harness.parent.mps import pid_alive
from harness.results import SubmissionResult

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started TEXT NOT NULL,
    finished TEXT,
    status TEXT NOT NULL,            -- running | complete | interrupted | failed | died
    mode TEXT NOT NULL,
    task TEXT NOT NULL,
    git_commit TEXT,
    device TEXT NOT NULL,
    vendor TEXT NOT NULL,
    arch TEXT NOT NULL,
    versions TEXT NOT NULL,          -- JSON: torch, triton, python, gpu runtime
    secret INTEGER                   -- the run's secret seed, written only once the run is over
);
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    name TEXT NOT NULL,
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    ok INTEGER NOT NULL,
    error TEXT NOT NULL,
    geomean_us REAL,
    scan TEXT NOT NULL DEFAULT '',   -- kernelguard classification
    flags TEXT NOT NULL DEFAULT '[]' -- JSON list of kernelguard findings (for review; not a verdict)
);
CREATE TABLE IF NOT EXISTS compile_reports (  -- --mode compile: each submission's cross-compile report
    run_id INTEGER NOT NULL REFERENCES runs(id),
    path TEXT NOT NULL,
    targets TEXT NOT NULL,           -- JSON list: gfx950, gfx942, sm_90, ...
    report TEXT NOT NULL,            -- JSON: harness/compile/'s report rows, or {"error": ...}
    ok INTEGER NOT NULL DEFAULT 0    -- 1: every kernel compiled for every target
);
CREATE TABLE IF NOT EXISTS bandwidth (   -- measured once per device, reused by later runs
    device TEXT PRIMARY KEY,
    bytes_per_s REAL NOT NULL,
    measured TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cases (
    submission_id INTEGER NOT NULL REFERENCES submissions(id),
    kind TEXT NOT NULL,
    idx INTEGER NOT NULL,
    name TEXT NOT NULL,
    ok INTEGER NOT NULL,
    reason TEXT NOT NULL,
    runs INTEGER, median_us REAL, mean_us REAL, std_us REAL, min_us REAL, max_us REAL,
    host_median_us REAL,
    tail_median_us REAL,             -- device-wide synchronize after the timed calls
    bytes INTEGER,                   -- least bytes for the KV format the submission reads
    warnings TEXT NOT NULL DEFAULT '',
    ci95_rel REAL                    -- half-width of the 95% CI of the median, relative to it
);
"""


# Columns added after the first release: (table, column, declaration), added to older databases.
ADDED_COLUMNS = [
    ("submissions", "scan", "TEXT NOT NULL DEFAULT ''"),
    ("submissions", "flags", "TEXT NOT NULL DEFAULT '[]'"),
    ("cases", "tail_median_us", "REAL"),
    ("cases", "bytes", "INTEGER"),
    ("cases", "warnings", "TEXT NOT NULL DEFAULT ''"),
    ("cases", "ci95_rel", "REAL"),
    ("runs", "secret", "INTEGER"),
    ("runs", "timing", "TEXT NOT NULL DEFAULT 'events'"),
    ("cases", "label", "TEXT"),  # the case's short label (4×1k), as the tables show it
    ("submissions", "phases", "TEXT NOT NULL DEFAULT '{}'"),
    ("runs", "sandboxed", "INTEGER"),  # 1: every worker ran inside the OS sandbox
    ("runs", "pid", "INTEGER"),  # the process writing a running run (a dead one is marked)
    ("submissions", "sandboxed", "INTEGER"),
    ("submissions", "audit", "TEXT NOT NULL DEFAULT ''"),  # the profiler's audit of its timings
    ("cases", "audit_us", "REAL"),  # the profiler's GPU time per call
    ("compile_reports", "ok", "INTEGER NOT NULL DEFAULT 0"),
    ("runs", "check_policy", "TEXT"),  # the check policy the run judged with (strict, competition)
    ("runs", "cases", "TEXT"),  # task: the task's own cases; small: its CPU shapes; custom: --shape
    ("submissions", "geomean_ci_low_us", "REAL"),  # the geomean's 95% interval (harness/ties.py: ties, --history)
    ("submissions", "geomean_ci_high_us", "REAL"),
    ("cases", "samples_us", "TEXT"),  # JSON: every timed call's µs (what the interval is computed from)
    ("cases", "clocks", "TEXT"),  # JSON: the clock watch's readings over the timed calls (harness/parent/gpuwatch.py)
    ("cases", "kernel_us", "REAL"),  # fenced runs: the worker's own events (median µs, a diagnostic)
    ("cases", "slot_copy_us", "REAL"),  # fenced runs: the output's copy into the slot, inside median_us
    ("cases", "fence_us", "REAL"),  # fenced runs: the fence's own cost, subtracted from a reading
    ("cases", "competition_us", "REAL"),  # --diagnostics: the competition's timing (mean µs, the worker's)
    ("cases", "isolated_us", "REAL"),  # --diagnostics: isolated calls' wall time (median µs, the worker's)
    ("cases", "energy_mj", "REAL"),  # --energy: mJ per call (a burst of calls back to back), and its ± bound
    ("cases", "energy_err_mj", "REAL"),
    ("cases", "energy_note", "TEXT"),  # why a case has no energy figure
]


# How long a write waits for a lock another process holds on the database (another run writing; or a
# submission of a run going on at the same time, which may read-lock any file it can open) before it
# fails with a StoreError instead of waiting for ever.
BUSY_SECONDS = 30.0


# A checkout of this project: a folder holding both (an installed copy has harness/ but no pyproject.toml).
CHECKOUT_MARKERS = ("pyproject.toml", "harness/__init__.py")
CODE_ROOT = Path(__file__).resolve().parents[2]  # the folder this code was loaded from: a checkout, or site-packages


def results_folder(cwd: Optional[Path] = None) -> Path:
    """Where the database and the worker logs go unless --db / --logs say otherwise: the results/
    of the checkout of this project that holds the working folder (at any depth), else of the
    checkout this code runs from, else (an installed mla-eval run outside any checkout) the
    per-user data folder, $XDG_DATA_HOME/mla-eval or ~/.local/share/mla-eval."""
    try:
        here = (cwd or Path.cwd()).resolve()
    except OSError:  # the working folder was removed
        here = Path("/")
    for folder in (here, *here.parents, CODE_ROOT):
        if all((folder / marker).is_file() for marker in CHECKOUT_MARKERS):
            return folder / "results"
    data = os.environ.get("XDG_DATA_HOME", "")
    return (Path(data) if os.path.isabs(data) else Path.home() / ".local" / "share") / "mla-eval"


class StoreError(RuntimeError):
    pass


def _writes(method):
    """A write of the store: a database error (locked, disk full, ...) is a one-line StoreError."""
    @functools.wraps(method)
    def write(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: {exc}") from None
    return write


class Store:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=BUSY_SECONDS)
            # The rollback journal (old copies of the pages a write changes: earlier runs' rows) stays
            # as one file instead of being made and deleted at each write: a file that exists before a
            # worker starts is covered where a folder the sandbox shows holds it (harness/parent/allowlist.py,
            # and launch.py's _make_private), one made later would not be.
            self.db.execute("PRAGMA journal_mode=PERSIST")
            self.db.executescript(SCHEMA)
            for table, column, decl in ADDED_COLUMNS:
                have = {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}
                if column not in have:
                    try:
                        self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
                    except sqlite3.OperationalError as exc:  # another process added it first
                        if "duplicate column" not in str(exc):
                            raise
            self.db.commit()
            self._mark_dead_runs()
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{self.path}: cannot open the results database ({exc})") from None

    def close(self) -> None:
        self.db.close()

    @_writes
    def start_run(self, mode: str, task: str, device: Any, versions: dict[str, str], timing: str = "events",
                  sandboxed: bool = False, check_policy: str = "", cases: str = "") -> int:
        with self.db:
            cur = self.db.execute(
                "INSERT INTO runs (started, status, mode, task, git_commit, device, vendor, arch, versions, timing,"
                " sandboxed, pid, check_policy, cases) VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (_now(), mode, task, git_commit(), device.name, device.vendor, device.arch, json.dumps(versions),
                 timing, int(sandboxed), os.getpid(), check_policy, cases))
        return int(cur.lastrowid)

    @_writes
    def end_run(self, run_id: int, status: str) -> None:
        """Mark a run that did not complete: interrupted (Ctrl-C) or failed (an error stopped it)."""
        with self.db:
            self.db.execute("UPDATE runs SET status = ?, finished = ? WHERE id = ? AND status = 'running'",
                            (status, _now(), run_id))

    def _mark_dead_runs(self) -> None:
        """Runs left 'running' by a process of this machine that no longer exists: 'died'."""
        rows = self.db.execute("SELECT id, pid FROM runs WHERE status = 'running' AND pid IS NOT NULL").fetchall()
        dead = [run_id for run_id, pid in rows if not pid_alive(pid)]
        with self.db:
            self.db.executemany("UPDATE runs SET status = 'died' WHERE id = ?", [(d,) for d in dead])

    @_writes
    def add_submission(self, run_id: int, result: SubmissionResult,
                       label: Optional[Callable[[dict], str]] = None) -> None:
        """`label`: the task's short case label (Problem.label), stored beside each case's spec."""
        interval = result.score_interval_us("geom")
        with self.db:  # one transaction: the submission and all its cases, or nothing
            cur = self.db.execute(
                "INSERT INTO submissions (run_id, name, path, sha256, ok, error, geomean_us, scan, flags, phases,"
                " sandboxed, audit, geomean_ci_low_us, geomean_ci_high_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                " ?, ?)",
                (run_id, result.name, result.path, result.sha256, int(result.ok), result.error, result.geomean_us(),
                 result.scan.classification, json.dumps(list(result.scan.flags)),
                 json.dumps({k: round(v, 4) for k, v in result.phases.items()}), int(result.sandboxed),
                 result.audit, *(interval or (None, None))))
            sid = cur.lastrowid
            for c in result.cases:
                d, h = c.device, c.host
                self.db.execute(
                    "INSERT INTO cases (submission_id, kind, idx, name, ok, reason, runs, median_us, mean_us, std_us,"
                    " min_us, max_us, host_median_us, tail_median_us, bytes, warnings, ci95_rel, audit_us, label,"
                    " samples_us, clocks, energy_mj, energy_err_mj, energy_note, kernel_us, competition_us, isolated_us,"
                    " slot_copy_us, fence_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (sid, c.kind, c.index, c.name, int(c.ok), c.reason,
                     d.runs if d else None, *(d.us[k] if d else None for k in ("median", "mean", "std", "min", "max")),
                     h.median * 1e6 if h else None, c.tail.median * 1e6 if c.tail else None, c.bytes,
                     "; ".join(c.warnings), d.ci_rel if d else None,
                     c.audit_s * 1e6 if c.audit_s is not None else None,
                     label(c.args) if label and c.args else None,
                     json.dumps([round(x * 1e6, 3) for x in c.samples]) if c.samples else None,
                     json.dumps(c.clocks) if c.clocks else None,
                     c.energy_j * 1e3 if c.energy_j is not None else None,
                     c.energy_err_j * 1e3 if c.energy_err_j is not None else None, c.energy_note or None,
                     c.kernel.median * 1e6 if c.kernel else None, c.competition.mean * 1e6 if c.competition else None,
                     c.isolated.median * 1e6 if c.isolated else None,
                     c.slot_copy_s * 1e6 if c.slot_copy_s is not None else None,
                     c.fence_s * 1e6 if c.fence_s is not None else None))

    @_writes
    def add_compile_report(self, run_id: int, path: str, targets: list[str], report: Any, ok: bool) -> None:
        with self.db:
            self.db.execute("INSERT INTO compile_reports (run_id, path, targets, report, ok) VALUES (?, ?, ?, ?, ?)",
                            (run_id, path, json.dumps(targets), json.dumps(report, default=str), int(ok)))

    def compile_reports(self, run_id: int) -> dict[str, Any]:
        """{submission path: its report} of a --mode compile run."""
        rows = self.db.execute("SELECT path, report FROM compile_reports WHERE run_id = ? ORDER BY rowid", (run_id,))
        return {path: json.loads(report) for path, report in rows}

    def bandwidth(self, device: str) -> Optional[float]:
        row = self.db.execute("SELECT bytes_per_s FROM bandwidth WHERE device = ?", (device,)).fetchone()
        return float(row[0]) if row else None

    @_writes
    def save_bandwidth(self, device: str, bytes_per_s: float) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO bandwidth VALUES (?, ?, ?)", (device, bytes_per_s, _now()))

    @_writes
    def finish_run(self, run_id: int, secret: Optional[int] = None) -> None:
        """Mark the run complete; its secret seed is stored only now, when no worker can use it."""
        with self.db:
            self.db.execute("UPDATE runs SET status = 'complete', finished = ?, secret = ? WHERE id = ?",
                            (_now(), secret, run_id))

    def best_per_submission(self, device: Optional[str] = None, task: Optional[str] = None,
                            check: Optional[str] = None) -> list[dict[str, Any]]:
        """Per submission file version (its path, so another file of the same name elsewhere is
        another submission, and its content's hash), task and check policy, case set, device, timing
        method (events or CUDA-graph replays, which are not comparable) and sandbox: the best and the
        median passing geomean over complete leaderboard runs of the task's own cases (one lucky run
        shows as a best far below the median), the number of runs and the last one. A benchmark run
        skipped the tests and a --shape run timed other cases, so neither counts; nor do runs stored
        before the database recorded their case set. Named by file name, with its folder where files
        of the same name appear. `device`, `task`, `check`: only runs on that device, of that task,
        judged by that check policy."""
        from harness.results import display_names

        filters = [(column, value) for column, value in (("device", device), ("task", task), ("check_policy", check))
                   if value is not None]
        where = "".join(f" AND r.{column} = ?" for column, _ in filters)
        groups: dict[tuple, list] = {}
        for row in self._rows(
                f"""SELECT s.path, s.sha256, s.geomean_us, s.geomean_ci_low_us, s.geomean_ci_high_us, s.sandboxed,
                           r.started, r.device, r.timing, r.task, r.check_policy, r.cases
                    FROM submissions s JOIN runs r ON r.id = s.run_id
                    WHERE r.status = 'complete' AND r.mode = 'leaderboard' AND r.cases IN ('task', 'small')
                          AND s.ok = 1 AND s.geomean_us IS NOT NULL{where}""",
                tuple(value for _, value in filters)):
            key = (row["path"], row["sha256"], row["task"], row["check_policy"], row["cases"], row["device"],
                   row["timing"], row["sandboxed"])
            groups.setdefault(key, []).append(row)
        names = display_names(sorted({key[0] for key in groups}))
        out = []
        for (path, sha, task, check, cases, dev, timing, sandboxed), rows in groups.items():
            best = min(rows, key=lambda r: r["geomean_us"])
            out.append({"name": names[path], "version": sha[:8], "task": task, "check": check,
                        "cases": cases, "device": dev, "timing": timing, "sandboxed": sandboxed, "runs": len(rows),
                        "best_us": best["geomean_us"], "best_ci_us": (
                            (best["geomean_ci_low_us"], best["geomean_ci_high_us"])
                            if best["geomean_ci_low_us"] is not None else None),
                        "median_us": statistics.median(r["geomean_us"] for r in rows),
                        "last_run": max(r["started"] for r in rows)})
        return sorted(out, key=lambda r: r["best_us"])

    def unlabelled_leaderboards(self) -> int:
        """Complete leaderboard runs stored before runs recorded their case set (--history leaves
        them out: their cases may have been custom ones)."""
        return int(self._rows("SELECT COUNT(*) AS n FROM runs WHERE mode = 'leaderboard' AND status = 'complete' "
                              "AND cases IS NULL")[0]["n"])

    def runs(self, limit: int = 30) -> list[sqlite3.Row]:
        """Recent runs, newest first, with how many submissions passed."""
        return self._rows(
            """SELECT r.id, r.started, r.status, r.mode, r.device, r.git_commit, r.sandboxed,
                      COUNT(s.id) AS submissions, COALESCE(SUM(s.ok), 0) AS passed
               FROM runs r LEFT JOIN (SELECT run_id, id, ok FROM submissions
                                      UNION ALL SELECT run_id, rowid, ok FROM compile_reports) s ON s.run_id = r.id
               GROUP BY r.id ORDER BY r.id DESC LIMIT ?""", (limit,))

    def timed_cases(self, run_id: int) -> list[sqlite3.Row]:
        """A run's passing benchmark cases: (submission, case) -> median and its CI."""
        if not self._rows("SELECT id FROM runs WHERE id = ?", (run_id,)):
            raise StoreError(f"{self.path}: there is no run {run_id} (see --mode history)")
        return self._rows(
            """SELECT s.name AS submission, s.path, c.idx, c.name AS spec, COALESCE(c.label, c.name) AS label,
                      c.median_us, c.ci95_rel, c.runs, r.timing
               FROM cases c JOIN submissions s ON s.id = c.submission_id JOIN runs r ON r.id = s.run_id
               WHERE s.run_id = ? AND c.kind = 'benchmark' AND c.ok = 1 AND c.median_us IS NOT NULL
               ORDER BY s.name, c.idx""", (run_id,))

    def timed_run(self, run_id: Optional[int] = None) -> Optional[sqlite3.Row]:
        """A complete benchmark or leaderboard run (the newest where `run_id` is None), or None."""
        rows = self._rows(
            "SELECT * FROM runs WHERE status = 'complete' AND mode IN ('benchmark', 'leaderboard')"
            + (" AND id = ?" if run_id is not None else "") + " ORDER BY id DESC LIMIT 1",
            (run_id,) if run_id is not None else ())
        return rows[0] if rows else None

    def run_results(self, run_id: int) -> list[tuple[sqlite3.Row, list[sqlite3.Row]]]:
        """A run's submissions, each with its cases (tests first, in order)."""
        subs = self._rows("SELECT * FROM submissions WHERE run_id = ? ORDER BY id", (run_id,))
        return [(s, self._rows("SELECT * FROM cases WHERE submission_id = ? ORDER BY kind DESC, idx", (s["id"],)))
                for s in subs]

    def timed_history(self, path: str, task: str, cases: Optional[str], before: int,
                      limit: int = 50) -> list[dict[str, Any]]:
        """The complete timed runs of the file at `path` (this task, the same case set) up to run `before`,
        oldest first: run, date, device, timing method, commit, the file's hash, geomean and the
        per-case medians {label: µs}."""
        out = []
        for row in self._rows(
                """SELECT s.id, s.sha256, s.geomean_us, s.ok, r.id AS run, r.started, r.device, r.timing, r.git_commit
                   FROM submissions s JOIN runs r ON r.id = s.run_id
                   WHERE s.path = ? AND r.task = ? AND r.cases IS ? AND r.status = 'complete'
                         AND r.mode IN ('benchmark', 'leaderboard') AND r.id <= ?
                   ORDER BY r.id DESC LIMIT ?""", (path, task, cases, before, limit)):
            medians = {c["label"] or c["name"]: c["median_us"] for c in self._rows(
                "SELECT label, name, median_us FROM cases WHERE submission_id = ? AND kind = 'benchmark' AND ok = 1 "
                "AND median_us IS NOT NULL ORDER BY idx", (row["id"],))}
            out.append({**{k: row[k] for k in ("run", "started", "device", "timing", "git_commit", "sha256", "geomean_us",
                                              "ok")}, "medians": medians})
        return out[::-1]

    def _rows(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        self.db.row_factory = sqlite3.Row
        try:
            return self.db.execute(sql, params).fetchall()
        finally:
            self.db.row_factory = None


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).parent)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=5, cwd=Path(__file__).parent)
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "") if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
