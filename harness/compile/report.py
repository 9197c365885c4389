"""The cross-compile report as the parent holds it: the child's JSON report read strictly
(`read_report`: every row's fields checked against ROW_FIELDS, every string cut at TEXT_LIMIT), and
shown: per target, how its launches were planned, each kernel's shared settings and a table laid out
for the terminal's width (`CompileReport`, `show_report`), or the rows as Markdown (`report_markdown`)."""

from __future__ import annotations

import json
import re
from typing import Any, Optional, Sequence

from harness.worker.channel import markdown_code, printable

TEXT_LIMIT = 600            # characters kept of any one string in a report


class CrossCompileError(RuntimeError):
    """The report could not be made; the message is one line saying why."""


# ---------------------------------------------------------------------------------------------
# The child's report, read strictly.
# ---------------------------------------------------------------------------------------------
_INT = (int, type(None))
# One report row: a kernel specialization on one target.
#   kernel, target; status (STATUSES), error (the compiler's one line, or a named message);
#   launches (calls seen on the CPU; 0 for an autotuning configuration that was only recorded), cases;
#   signature (argument types), constexprs, options (launch options), overrides (--set / --option
#   applied), compile_args (exactly what went to triton.compile: signature, constexprs and attrs by
#   argument index, options);
#   vgpr (AMD: .vgpr_count, architectural VGPRs and AGPRs together; NVIDIA: registers per thread),
#   agpr, sgpr, spill_vgpr, spill_sgpr, scratch_bytes (per lane / thread), lds_bytes (LDS / shared
#   memory per workgroup), occupancy (waves per SIMD) and occupancy_limit (what limits it),
#   compiler_occupancy (LLVM's own figure, registers only), num_warps;
#   matrix (matrix instructions in the assembly), uses_dot (the kernel has a tl.dot), notes;
#   plan (how the launches were planned: "as on" the target's device, or PLANNED_ON_CPU and why) and
#   on_target (whether as on the target's device).
ROW_FIELDS: dict[str, Any] = {
    "kernel": str, "target": str, "plan": str, "on_target": bool, "status": str, "error": (str, type(None)),
    "launches": int, "cases": list,
    "signature": dict, "constexprs": dict, "options": dict, "overrides": list, "compile_args": dict,
    "vgpr": _INT, "agpr": _INT, "sgpr": _INT, "spill_vgpr": _INT, "spill_sgpr": _INT, "scratch_bytes": _INT,
    "lds_bytes": _INT, "occupancy": _INT, "occupancy_limit": str, "compiler_occupancy": _INT,
    "num_warps": _INT, "matrix": list, "uses_dot": bool, "notes": list,
}
STATUSES = ("compiled", "failed", "won't launch", "skipped")


def read_report(raw: bytes) -> tuple[list[dict], Optional[str]]:
    """(rows, a one-line problem or None) from the child's JSON report, every field checked against
    ROW_FIELDS; anything malformed raises CrossCompileError."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # (deep nesting: RecursionError)
        raise CrossCompileError(f"the report is not valid JSON ({printable(str(exc)[:120])})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise CrossCompileError("the report is not an object with a list of rows")
    problem = doc.get("problem")
    if problem is not None and not isinstance(problem, str):
        raise CrossCompileError("the report's problem is not a string")
    return [_checked_row(i, row) for i, row in enumerate(doc["rows"])], problem and problem[:TEXT_LIMIT]


def _checked_row(index: int, row: Any) -> dict:
    if not isinstance(row, dict):
        raise CrossCompileError(f"report row {index} is not an object")
    out = {}
    for key, kind in ROW_FIELDS.items():
        value = row.get(key)
        if not isinstance(value, kind) or (kind is _INT and isinstance(value, bool)):
            raise CrossCompileError(f"report row {index}: {key} is {type(value).__name__}")
        out[key] = _clip(value)
    if out["status"] not in STATUSES:
        raise CrossCompileError(f"report row {index}: unknown status {out['status'][:40]!r}")
    for key in ("cases", "notes", "matrix", "overrides"):
        if not all(isinstance(item, str) for item in out[key]):
            raise CrossCompileError(f"report row {index}: {key} holds a non-string")
    return out


def _clip(value: Any, depth: int = 0) -> Any:
    """`value` with every string cut at TEXT_LIMIT characters (a JSON tree from the report)."""
    if depth > 8:
        raise CrossCompileError("the report nests too deep")
    if isinstance(value, str):
        return printable(value[:TEXT_LIMIT])
    if isinstance(value, list):
        return [_clip(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {printable(str(k)[:TEXT_LIMIT]): _clip(v, depth + 1) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------------------------
# Presentation.
# ---------------------------------------------------------------------------------------------
def _value_text(value: Any) -> str:
    if isinstance(value, dict):
        if "dtype" in value:
            return str(value["dtype"])
        if "tuple" in value:
            return "(" + ",".join(map(_value_text, value["tuple"])) + ")"
        return str(next(iter(value.values()), "?"))
    return str(value)


def specialization_labels(rows: Sequence[dict]) -> list[str]:
    """A short name per row: the kernel, the constexprs that differ between its specializations in
    this report, and its launch options (num_warps as warps=, ...); values set by an override are
    left out (they are the same on every row: the title names them)."""
    varying: dict[str, set] = {}
    for row in rows:
        for name, value in row["constexprs"].items():
            varying.setdefault(f"{row['kernel']}.{name}", set()).add(json.dumps(value, sort_keys=True))
    labels = []
    for row in rows:
        overridden = {text.split("=", 1)[0] for text in row["overrides"]}
        parts = [f"{name}={_value_text(value)}" for name, value in row["constexprs"].items()
                 if len(varying[f"{row['kernel']}.{name}"]) > 1 and name not in overridden]
        parts += [f"{name.removeprefix('num_')}={_value_text(value)}" for name, value in row["options"].items()
                  if name not in overridden]
        labels.append(" ".join([row["kernel"], *parts]))
    return labels


def _kib(n: Optional[int]) -> str:
    return "-" if n is None else "0" if n == 0 else f"{n / 1024:.1f} KiB"


COLUMNS = ("kernel", "target", "status", "VGPR (AGPR)", "SGPR", "spills", "LDS", "waves/SIMD",
           "matrix instructions", "notes")


def _table_cells(rows: Sequence[dict]) -> list[list[str]]:
    """One list of COLUMNS texts per row."""
    out = []
    for label, row in zip(specialization_labels(rows), rows):
        vgpr = "-" if row["vgpr"] is None else f"{row['vgpr']}" + (f" ({row['agpr']})" if row["agpr"] else "")
        spill = ("-" if row["status"] not in ("compiled", "won't launch") else f"{row['scratch_bytes']} B"
                 if row["scratch_bytes"] else "in regs" if row["spill_vgpr"] or row["spill_sgpr"] else "0")
        waves = "-" if row["occupancy"] is None else f"{row['occupancy']} ({row['occupancy_limit']})"
        matrix = ", ".join(row["matrix"]) or ("none" if row["uses_dot"] else "-")
        notes = "; ".join(([row["error"]] if row["error"] else []) + row["notes"])
        out.append([label, row["target"], row["status"], vgpr, "-" if row["sgpr"] is None else str(row["sgpr"]),
                    spill, _kib(row["lds_bytes"]), waves, matrix, notes])
    return out


_AMD_KIND = re.compile(r"v_(mfma|smfmac|wmma|swmmac)(_scale)?_[a-z0-9]+_\d+x\d+x\d+_?(\w*)")
_PTX_TYPE = re.compile(r"(?:kind::)?(b?f16|tf32|f32|f64|e[45]m[23]|e[23]m[123]|[su][48]|f8f6f4|mxf\w+)")


def matrix_kind(name: str) -> str:
    """What a matrix instruction multiplies, short: AMD's operand type ("bf16", "f32", "xf32", "f8f6f4
    scaled" for the scaled MFMA, "... sparse" for smfmac, "... wmma"); NVIDIA's instruction and A
    operand type ("mma bf16", "wgmma e4m3")."""
    match = _AMD_KIND.fullmatch(name)
    if match:
        op, scaled, operands = match.groups()
        return " ".join(filter(None, [operands or "?", "scaled" if scaled else "",
                                      {"smfmac": "sparse", "wmma": "wmma", "swmmac": "sparse wmma"}.get(op, "")]))
    parts = name.split(".")
    types = [m.group(1) for m in map(_PTX_TYPE.fullmatch, parts[1:]) if m]
    return f"{parts[0]} {types[1] if len(types) > 1 else types[0] if types else '?'}"


def _matrix_cell(row: dict) -> str:
    return ", ".join(sorted({matrix_kind(n) for n in row["matrix"]})) or ("none" if row["uses_dot"] else "-")


def _shown_settings(row: dict) -> list[tuple[str, Any]]:
    """A row's constexprs, then its launch options, as (name, value): those selecting a code path
    (booleans, strings, dtypes, None) first, each group in the kernel's order."""
    constexprs = list(row["constexprs"].items())
    switch = [(n, v) for n, v in constexprs if v is None or isinstance(v, (bool, str)) or
              (isinstance(v, dict) and "dtype" in v)]
    return switch + [item for item in constexprs if item not in switch] + list(row["options"].items())


def variants(rows: Sequence[dict]) -> dict[str, tuple[str, list[str]]]:
    """Per kernel of `rows` (one target's): the settings every launch of it shares there, its
    variant ("QK_SCALED=True DOT_DTYPE=bf16 ... num_warps=4"), and per row (in order) the settings
    that set it apart from the kernel's other specializations ("NUM_SPLITS=2")."""
    by_kernel: dict[str, list[dict]] = {}
    for row in rows:
        by_kernel.setdefault(row["kernel"], []).append(row)
    out: dict[str, tuple[str, list[str]]] = {}
    for kernel, group in by_kernel.items():
        settings = [_shown_settings(row) for row in group]
        texts = [[f"{name}={_value_text(value)}" for name, value in items] for items in settings]
        shared = [text for text in texts[0] if all(text in other for other in texts[1:])]
        out[kernel] = (" ".join(shared), [" ".join(t for t in own if t not in shared) for own in texts])
    return out


_STATUS_STYLE = {"compiled": "green", "failed": "red", "won't launch": "red", "skipped": "yellow"}
_HEADERS = ("#", "kernel", "status", "VGPR\n(AGPR)", "SGPR", "scratch", "LDS", "waves\nper SIMD", "matrix")


def _spill_cell(row: dict) -> str:
    return ("-" if row["status"] not in ("compiled", "won't launch") else f"{row['scratch_bytes']} B"
            if row["scratch_bytes"] else "in regs" if row["spill_vgpr"] or row["spill_sgpr"] else "0")


def _numbers(row: dict) -> list[str]:
    """VGPR (AGPR), SGPR, scratch, LDS, waves per SIMD (what limits them) of a row, as shown."""
    vgpr = "-" if row["vgpr"] is None else f"{row['vgpr']}" + (f" ({row['agpr']})" if row["agpr"] else "")
    waves = "-" if row["occupancy"] is None else f"{row['occupancy']} ({row['occupancy_limit']})"
    return [vgpr, "-" if row["sgpr"] is None else str(row["sgpr"]), _spill_cell(row), _kib(row["lds_bytes"]), waves]


def _refs(numbers: Sequence[int]) -> str:
    """1, 2, 3, 5 -> "1-3, 5"."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs)


class CompileReport:
    """One submission's report, laid out for the width it is printed at (`console.print` passes it).
    A title; then per target: how its launches were planned (as on its GPU, or on the CPU and why),
    each kernel's shared settings there (its variant), and its specializations, numbered: a table
    while every column fits whole (kernel names and numbers are never folded), else one short
    paragraph each; under a table, the matrix instructions in full and the notes, each once with the
    numbers of the rows it concerns."""

    def __init__(self, rows: Sequence[dict], name: str, targets: Sequence[str], detail: str = ""):
        self.rows, self.name, self.detail = list(rows), name, detail
        self.targets = list(dict.fromkeys([*targets, *(row["target"] for row in self.rows)]))

    def __rich_console__(self, console: Any, options: Any):
        from rich.padding import Padding
        from rich.text import Text

        yield Text(f"{self.name}: Triton kernels compiled for {', '.join(self.targets)}, offline{self.detail}",
                   style="bold")
        if self.rows and not self.rows[0].get("sandboxed", True):
            yield Text(f"warning: {self.name} ran without the OS sandbox", style="yellow")
        for target in self.targets:
            rows = [row for row in self.rows if row["target"] == target]
            if not rows:
                continue
            plans = list(dict.fromkeys(row["plan"] for row in rows))
            on_target = all(row["on_target"] for row in rows)
            yield Text.assemble("\n", (target, "bold"), ": ", ("; ".join(plans) or "planned: unknown",
                                                                "" if on_target else "yellow"))
            shared = variants(rows)
            for kernel, (settings, _) in shared.items():
                yield Padding(Text.assemble((kernel, "bold"), ": ", settings or "(no settings)"), (0, 0, 0, 2),
                              expand=False)
            labels = self._labels(rows, shared)
            table = self._table(rows, labels, console, options)
            if table is None:
                yield from self._paragraphs(rows, labels)
                continue
            yield table
            yield from self._below(rows)

    @staticmethod
    def _labels(rows: Sequence[dict], shared: dict) -> list[str]:
        """Per row: its kernel and what sets the row apart from the kernel's other specializations."""
        seen: dict[str, int] = {}
        labels = []
        for row in rows:
            index = seen[row["kernel"]] = seen.get(row["kernel"], -1) + 1
            labels.append(" ".join(filter(None, [row["kernel"], shared[row["kernel"]][1][index]])))
        return labels

    @staticmethod
    def _table(rows: Sequence[dict], labels: Sequence[str], console: Any, options: Any):
        """The table of `rows` if it fits whole (no column folded): each label and matrix cell on one
        line, or else the label's kernel over what sets the row apart and the matrix kinds one per
        line; None if neither fits."""
        from rich.measure import Measurement
        from rich.table import Table
        from rich.text import Text

        for stacked in (False, True):
            table = Table()
            for header in _HEADERS:
                table.add_column(header, justify="left" if header in ("kernel", "status", "matrix") else "right",
                                 no_wrap=True)
            for number, (label, row) in enumerate(zip(labels, rows), 1):
                matrix = _matrix_cell(row)
                if stacked:
                    label, matrix = label.replace(" ", "\n", 1), matrix.replace(", ", "\n")
                status = Text(row["status"], style=_STATUS_STYLE.get(row["status"], ""))
                table.add_row(str(number), Text(label), status, *map(Text, _numbers(row)), Text(matrix))
            if Measurement.get(console, options.update_width(100_000), table).maximum <= options.max_width:
                return table
        return None

    @staticmethod
    def _details(row: dict) -> list[str]:
        return ([f"matrix instructions: {', '.join(row['matrix'])}"] if row["matrix"] else []) + \
            ([row["error"]] if row["error"] else []) + row["notes"]

    def _below(self, rows: Sequence[dict]):
        """Each detail of the rows once, after the numbers of the rows it concerns."""
        from rich.padding import Padding
        from rich.text import Text

        where: dict[str, list[int]] = {}
        for number, row in enumerate(rows, 1):
            for text in self._details(row):
                where.setdefault(text, []).append(number)
        for text, numbers in where.items():
            yield Padding(Text.assemble((_refs(numbers), "bold"), ": ", text), (0, 0, 0, 2), expand=False)

    def _paragraphs(self, rows: Sequence[dict], labels: Sequence[str]):
        """Narrow: each row as a paragraph (its number, label and status; its numbers; its details)."""
        from rich.padding import Padding
        from rich.text import Text

        for number, (label, row) in enumerate(zip(labels, rows), 1):
            yield Text.assemble((f"{number} ", "bold"), (label, "bold"), ": ",
                                (row["status"], _STATUS_STYLE.get(row["status"], "")))
            for line in filter(None, [_summary(row), *self._details(row)]):
                yield Padding(Text(line), (0, 0, 0, 2), expand=False)


def _summary(row: dict) -> str:
    """A row's numbers in words: "238 VGPRs, 58 SGPRs, no scratch, LDS 16.0 KiB, 2 waves per SIMD
    (VGPR)" (NVIDIA: registers, local memory, shared memory)."""
    amd = not row["target"].startswith("sm")
    parts = []
    if row["vgpr"] is not None:
        parts.append(f"{row['vgpr']} {'VGPRs' if amd else 'registers'}"
                     + (f" ({row['agpr']} AGPRs)" if row["agpr"] else ""))
    if row["sgpr"] is not None:
        parts.append(f"{row['sgpr']} SGPRs")
    spill = _spill_cell(row)
    if spill != "-":
        memory = "scratch" if amd else "local memory"
        parts.append(f"no {memory}" if spill == "0" else "spills in registers" if spill == "in regs"
                     else f"{spill} of {memory}")
    if row["lds_bytes"] is not None:
        parts.append(f"{'LDS' if amd else 'shared memory'} {_kib(row['lds_bytes'])}")
    if row["occupancy"] is not None:
        waves = f"{row['occupancy']} wave{'' if row['occupancy'] == 1 else 's'}"
        parts.append(f"{waves} per SIMD ({row['occupancy_limit']})")
    return ", ".join(parts)


def report_markdown(rows: Sequence[dict]) -> str:
    """The rows as a Markdown table (for BENCHMARKS.md and reviews): COLUMNS, one line per kernel
    specialization and target."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(markdown_code(cell) for cell in cells) + " |" for cells in _table_cells(rows)]
    return "\n".join(lines) + "\n"


def show_report(console: Any, rows: Sequence[dict], name: str, targets: Sequence[str], detail: str = "") -> bool:
    """Print one submission's report (CompileReport, or that it launched no Triton kernel) to a rich
    console; whether every kernel compiled for every target. `detail` ends the title."""
    if not rows:
        from rich.text import Text

        console.print(Text(f"{name} launched no Triton kernel on the task's small cases: nothing to compile."))
        return True
    console.print(CompileReport(rows, name, targets, detail))
    return all(row["status"] == "compiled" for row in rows)
