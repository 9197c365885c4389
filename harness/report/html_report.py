"""One self-contained HTML page of a timed run and its submissions' history, read from the results
database (`--html PATH`): the leaderboard with its trust badges, a chart per case, a history per
submission. Nothing is fetched: styles, script and charts (SVG drawn by matplotlib) are inline, and
the page's Content-Security-Policy forbids any request. Every text that comes from a submission
(names, reasons, scan flags) is escaped; charts label submissions by rank only, never by name.
"""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path
from typing import Any, Optional, Sequence

from harness.parent.gpuwatch import run_line
from harness.results import CPU_TIMING_METHOD, geomean, is_cpu_timed, is_verified, ranked
from harness.ties import TIE_RULE
from harness.report.store import Store


class PageError(RuntimeError):
    pass


CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf")


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def write_page(store: Store, path: str | Path, run_id: Optional[int] = None) -> Path:
    """The page of run `run_id` (the newest complete timed run where None) written to `path`."""
    run = store.timed_run(run_id)
    if run is None:
        raise PageError("--html: no complete benchmark or leaderboard run in the database" if run_id is None
                        else f"--html: run {run_id} is no complete benchmark or leaderboard run")
    rows = _rows(store, run)
    page = render(run, rows, store.bandwidth(run["device"]),
                  {r["path"]: store.timed_history(r["path"], run["task"], run["cases"], run["id"]) for r in rows})
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out


def _rows(store: Store, run) -> list[dict[str, Any]]:
    """The run's submissions as plain data, ranked: verified timings first (1, 2, ...), then
    unverified ones apart (u1, u2, ...), then failures."""
    rows = []
    for sub, cases in store.run_results(run["id"]):
        timed = {(c["label"] or c["name"]): c for c in cases if c["kind"] == "benchmark"}
        failed = next((c for c in cases if not c["ok"] and not c["reason"].startswith("not run")), None)
        low, high = sub["geomean_ci_low_us"], sub["geomean_ci_high_us"]
        rows.append({"name": sub["name"], "path": sub["path"], "sha256": sub["sha256"], "ok": bool(sub["ok"]),
                     "geomean": sub["geomean_us"], "interval": (low, high) if low is not None else None,
                     "verified": is_verified(sub["audit"] or ""),
                     "timing": sub["audit"] or "", "sandboxed": sub["sandboxed"], "scan": sub["scan"],
                     "flags": json.loads(sub["flags"] or "[]"), "cases": timed,
                     "detail": sub["error"] or (f"{failed['kind']} {failed['label'] or failed['name']}: {failed['reason']}"
                                                if failed else "")})
    return [{**r, "rank": rank} for r, rank in ranked(rows, lambda r: r["geomean"], lambda r: r["verified"],
                                                       lambda r: r["name"], lambda r: r["interval"])]


def _union(keyed: Sequence[dict]) -> list[str]:
    """The keys of every dict, each once, in order of first appearance (case labels)."""
    return list(dict.fromkeys(key for d in keyed for key in d))


def _pct_bandwidth(r: dict, bandwidth: Optional[float]) -> Optional[float]:
    parts = [c["bytes"] / (c["median_us"] * 1e-6) / bandwidth for c in r["cases"].values()
             if bandwidth and c["ok"] and c["bytes"] and c["median_us"]]
    share = geomean(parts) if r["ok"] else None
    return 100 * share if share else None


def _num(x: Optional[float], digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def render(run, rows: list[dict], bandwidth: Optional[float], history: dict[str, list[dict]]) -> str:
    labels = _union([r["cases"] for r in rows])
    clocks = run_line([(f"{r['name']} {label}", _Watched(c)) for r in rows for label, c in r["cases"].items()])
    verified = sum(r["verified"] for r in rows)
    cpu = any(is_cpu_timed(r["timing"]) for r in rows)  # (then the run's timing is the CPU's, whatever it stored)
    head = (f"Run {run['id']} · {esc(run['task'])} · {esc(run['mode'])} · {esc(run['device'])} · "
            f"{esc(run['started'])} · commit {esc(run['git_commit'] or '-')} · "
            f"timing: {esc(CPU_TIMING_METHOD if cpu else run['timing'])}"
            + (f" · copy bandwidth {bandwidth / 1e12:.2f} TB/s" if bandwidth else ""))
    body = [f"<h1>Leaderboard</h1><p class=meta>{head}</p>",
            *(["<p class=warn><b>Not a GPU ranking: CPU times (Triton kernels in its interpreter).</b> They show "
               "that timing works; they do not say which kernel is faster on a GPU.</p>"] if cpu else []),
            "<p class=note>µs: median time per call (± its 95% interval). Ranks 1, 2, … are timings measured "
            "outside the submission's process (verified); u1, u2, … were timed inside it (unverified) and are "
            f"ranked apart. {verified} of {len(rows)} submission(s) verified. =N: tied, the geomeans' 95% intervals "
            f"overlap ({esc(TIE_RULE)}).</p>", *([f"<p class=note>{esc(clocks)}</p>"] if clocks else []),
            "<div class=controls><input id=filter type=search placeholder='filter submissions' "
            "aria-label='filter submissions'> <label><input id=onlyverified type=checkbox> verified only</label></div>",
            _leaderboard(rows, labels, bandwidth), "<h2>Per case</h2>", _legend(rows),
            "<div class=charts>" + "".join(_case_chart(rows, label, bandwidth) for label in labels) + "</div>",
            "<h2>History per submission</h2>"]
    body += [_history(r, history.get(r["path"], [])) for r in rows]
    return PAGE.format(csp=CSP, title=esc(f"Leaderboard · run {run['id']} · {run['task']}"), style=STYLE,
                       body="\n".join(body), script=SCRIPT)


class _Watched:
    """A stored case as gpuwatch.run_line reads a CaseResult: its clocks and warnings."""

    def __init__(self, case):
        self.clocks = json.loads(case["clocks"]) if case["clocks"] else {}
        self.warnings = [w for w in (case["warnings"] or "").split("; ") if w]


def _badges(r: dict) -> str:
    out = ['<span class="badge ok">sandboxed</span>' if r["sandboxed"] else '<span class="badge bad">unsandboxed</span>']
    out.append(f'<span class="badge {"ok" if r["verified"] else "warn"}" title="{esc(r["timing"])}">'
               f'{"verified" if r["verified"] else "unverified"}</span>')
    if r["scan"] and r["scan"] not in ("clean", "valid"):
        out.append(f'<span class="badge warn" title="{esc("; ".join(r["flags"]))}">scan: {esc(r["scan"])}</span>')
    return " ".join(out)


def _leaderboard(rows: list[dict], labels: list[str], bandwidth: Optional[float]) -> str:
    cols = ["#", "submission", "status", "geomean µs", "95% CI µs", "% of BW"] + labels + ["trust", "detail"]
    kinds = ["rank", "text", "text", "num", "num", "num"] + ["num"] * len(labels) + ["text", "text"]
    header = "".join(f'<th data-kind="{k}" tabindex=0>{esc(c)}</th>' for c, k in zip(cols, kinds))
    lines = []
    for r in rows:
        pct = _pct_bandwidth(r, bandwidth)
        interval = f"{_num(r['interval'][0])}–{_num(r['interval'][1])}" if r["interval"] else "-"
        cells = [(r["rank"], _rank_key(r["rank"])), (r["name"], r["name"]), ("pass" if r["ok"] else "FAIL", r["ok"]),
                 (_num(r["geomean"]), r["geomean"]), (interval, r["interval"][0] if r["interval"] else None),
                 (_num(pct, 0) + ("%" if pct is not None else ""), pct)]
        tds = [f'<td data-v="{esc(v)}">{esc(t)}</td>' for t, v in cells]
        for label in labels:
            c = r["cases"].get(label)
            if c is None or not c["ok"] or c["median_us"] is None:
                tds.append('<td data-v="">' + ("x" if c is not None else "-") + "</td>")
                continue
            ci = f' <span class=ci>±{c["ci95_rel"] * 100:.1f}%</span>' if c["ci95_rel"] is not None else ""
            warn = f' <span class=w title="{esc(c["warnings"])}">⚠</span>' if c["warnings"] else ""
            energy = (f' <span class=ci title="energy per call, from a burst of calls back to back (--energy, a diagnostic)">{c["energy_mj"]:,.3f} mJ'
                      f'</span>' if c["energy_mj"] is not None else "")
            tds.append(f'<td data-v="{c["median_us"]}">{_num(c["median_us"])}{ci}{warn}{energy}</td>')
        tds.append(f"<td>{_badges(r)}</td>")
        tds.append(f"<td class=detail>{esc(r['detail'])}</td>")
        lines.append(f'<tr data-name="{esc(r["name"].lower())}" data-verified="{int(r["verified"])}">{"".join(tds)}</tr>')
    return (f'<div class=scroll><table id=board><thead><tr>{header}</tr></thead><tbody>{"".join(lines)}</tbody>'
            "</table></div>")


def _rank_key(rank: str) -> str:
    """Sortable: verified ranks, then unverified, then none ("=2": tied, sorts as 2)."""
    rank = rank.lstrip("=")
    if rank in ("-", ""):
        return "3"
    return f"2{int(rank[1:]):06d}" if rank.startswith("u") else f"1{int(rank):06d}"


def _legend(rows: list[dict]) -> str:
    items = [f'<li><span class=sw style="background:{COLORS[i % len(COLORS)]}"></span>{esc(r["rank"])} '
             f'{esc(r["name"])}</li>' for i, r in enumerate(rows) if r["geomean"] is not None]
    return f"<ul class=legend>{''.join(items)}</ul>" if items else "<p>No submission was timed.</p>"


def _pyplot():
    from harness.report.plots import PlotError, _pyplot as pyplot

    try:
        plt = pyplot()
    except PlotError:
        raise PageError("--html needs matplotlib for its charts: pip install -e '.[plots]'") from None
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "mla-eval", "font.size": 8})
    return plt


def _svg(fig) -> str:
    """A figure as inline SVG: no XML prolog, no comments (matplotlib writes text there), no size
    of its own (the page sizes it)."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buffer.getvalue()
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = text[text.index("<svg"):]
    return re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 class="chart"', text, count=1)


def _log_axis(axis, set_scale) -> None:
    """A log axis labelled in plain numbers at 1, 2 and 5 of each decade (minor labels overlap)."""
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    set_scale("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5), numticks=8))
    axis.set_major_formatter(ScalarFormatter())
    axis.set_minor_formatter(NullFormatter())


def _case_chart(rows: list[dict], label: str, bandwidth: Optional[float]) -> str:
    plt = _pyplot()
    timed = [(i, r) for i, r in enumerate(rows) if r["geomean"] is not None and r["cases"].get(label)
             and r["cases"][label]["ok"] and r["cases"][label]["median_us"]]
    if not timed:
        return ""
    fig = plt.figure(figsize=(3.4, 0.5 + 0.28 * len(timed)))
    ax = fig.add_subplot()
    for y, (i, r) in enumerate(timed):
        c = r["cases"][label]
        err = c["median_us"] * (c["ci95_rel"] or 0)
        ax.errorbar(c["median_us"], y, xerr=err, fmt="o", color=COLORS[i % len(COLORS)], capsize=3)
    ax.set_yticks(range(len(timed)), [r["rank"] for _, r in timed])
    ax.invert_yaxis()
    least = min((r["cases"][label]["bytes"] for _, r in timed if r["cases"][label]["bytes"]), default=None)
    if bandwidth and least:
        floor = least / bandwidth * 1e6
        ax.axvline(floor, color="black", linestyle="--", linewidth=1)
        ax.text(floor, -0.6, " floor", fontsize=7, va="bottom")
    _log_axis(ax.xaxis, ax.set_xscale)
    ax.set_xlabel("µs per call (log)")
    ax.set_title(label)
    return f"<figure>{_svg(fig)}</figure>"


def _history(r: dict, runs: list[dict]) -> str:
    title = f"<h3>{esc(r['rank'])} {esc(r['name'])}</h3>"
    if not runs:
        return title + "<p>No timed run of this file.</p>"
    labels = _union([h["medians"] for h in runs])
    chart = ""
    if len(runs) > 1 and labels:
        plt = _pyplot()
        fig = plt.figure(figsize=(6, 2.4))
        ax = fig.add_subplot()
        for j, label in enumerate(labels):
            points = [(k, h["medians"][label]) for k, h in enumerate(runs) if label in h["medians"]]
            ax.plot([k for k, _ in points], [v for _, v in points], marker=".", label=label,
                    color=COLORS[j % len(COLORS)])
        _log_axis(ax.yaxis, ax.set_yscale)
        ax.set_xticks(range(len(runs)), [str(h["run"]) for h in runs], rotation=90 if len(runs) > 12 else 0)
        ax.set_xlabel("run")
        ax.set_ylabel("median µs (log)")
        ax.legend(fontsize=6, ncol=4, loc="upper left", bbox_to_anchor=(1, 1))
        chart = f"<figure class=wide>{_svg(fig)}</figure>"
    head = "".join(f"<th>{esc(c)}</th>" for c in ["run", "date", "device", "timing", "commit", "file sha256",
                                                   "geomean µs"] + labels)
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(v)}</td>" for v in (h["run"], h["started"], h["device"], h["timing"],
                                                         h["git_commit"] or "-", h["sha256"][:12], _num(h["geomean_us"])))
        + "".join(f"<td>{_num(h['medians'].get(label))}</td>" for label in labels) + "</tr>" for h in runs)
    return (f"{title}{chart}<div class=scroll><table class=history><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1rem;color:#222;max-width:1400px}
h1{font-size:1.5rem;margin:.2rem 0}h2{font-size:1.2rem;margin-top:1.5rem}h3{font-size:1rem;margin:1rem 0 .3rem}
.meta,.note{color:#555;margin:.2rem 0}.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.4rem 0}th,td{border-bottom:1px solid #ddd;padding:.25rem .5rem;text-align:right;
white-space:nowrap}th{cursor:pointer;background:#f4f4f4;position:sticky;top:0}td:nth-child(2),th:nth-child(2){text-align:left}
td.detail{text-align:left;white-space:normal;min-width:16rem;max-width:40rem;color:#a00}
.ci{color:#777;font-size:.8em}.w{color:#b80}.badge{display:inline-block;border-radius:.6rem;padding:0 .45rem;
font-size:.75rem;margin:1px}.ok{background:#dfd}.warn{background:#ffe3b3}.bad{background:#fcc}
.controls{margin:.5rem 0}.charts{display:flex;flex-wrap:wrap;gap:.5rem}figure{margin:0;flex:1 1 300px;max-width:420px}
figure.wide{max-width:760px}svg.chart{width:100%;height:auto}.legend{list-style:none;padding:0;display:flex;
flex-wrap:wrap;gap:.3rem 1rem}.sw{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:middle}
tr.hidden{display:none}
@media (max-width:600px){body{margin:.4rem;font-size:13px}figure{flex-basis:100%;max-width:100%}}
"""

SCRIPT = """
(function(){
  var table=document.getElementById('board'); if(!table) return;
  var body=table.tBodies[0];
  Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,col){
    var dir=1;
    function sort(){
      var kind=th.getAttribute('data-kind');
      var rows=Array.prototype.slice.call(body.rows);
      rows.sort(function(a,b){
        var x=a.cells[col].getAttribute('data-v'), y=b.cells[col].getAttribute('data-v');
        if(x===null) x=a.cells[col].textContent; if(y===null) y=b.cells[col].textContent;
        if(kind==='num'){var p=parseFloat(x),q=parseFloat(y);
          if(isNaN(p)&&isNaN(q)) return 0; if(isNaN(p)) return 1; if(isNaN(q)) return -1; return dir*(p-q);}
        return dir*x.localeCompare(y);});
      rows.forEach(function(r){body.appendChild(r);}); dir=-dir;}
    th.addEventListener('click',sort);
    th.addEventListener('keydown',function(e){if(e.key==='Enter') sort();});
  });
  var filter=document.getElementById('filter'), only=document.getElementById('onlyverified');
  function apply(){var q=filter.value.toLowerCase();
    Array.prototype.forEach.call(body.rows,function(r){
      var hide=(q&&r.getAttribute('data-name').indexOf(q)<0)||(only.checked&&r.getAttribute('data-verified')!=='1');
      r.className=hide?'hidden':'';});}
  filter.addEventListener('input',apply); only.addEventListener('change',apply);
})();
"""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{style}</style></head>
<body>
{body}
<script>{script}</script>
</body></html>
"""
