"""Tries: under `--mode compile`, write a made-up report into the capture process's report (its
descriptor found through /proc/self/fd: the pipe to the parent that is not its standard output or
error, or a file named report.json) and exit: rows that claim a compiled kernel, a note carrying terminal
escape sequences, and (copied as bad_*.py) a launch option the report's printer cannot render.
Must get: the rows are shown as the diagnostic they are, with no control character reaching the
terminal; a report that cannot be shown fails this file only ("the report could not be shown")."""
import json
import os


def _is_report(n: str) -> bool:
    link = os.readlink(f"/proc/self/fd/{n}")
    return int(n) > 2 and (link.endswith("/report.json") or (link.startswith("pipe:") and link not in (
        os.readlink("/proc/self/fd/1"), os.readlink("/proc/self/fd/2"))))


fd = next(int(n) for n in sorted(os.listdir("/proc/self/fd"), key=int) if _is_report(n))


def row(target):
    options = {"num_warps": {"tuple": 5}} if os.path.basename(__file__).startswith("bad_") else {}
    return {"kernel": "mla_decode_fused", "target": target, "status": "compiled", "error": None, "launches": 4,
            "cases": ["test 2x64"], "signature": {}, "constexprs": {}, "options": options, "overrides": [],
            "compile_args": {}, "vgpr": 64, "agpr": 0, "sgpr": 32, "spill_vgpr": 0, "spill_sgpr": 0,
            "scratch_bytes": 0, "lds_bytes": 16384, "occupancy": 8, "occupancy_limit": "waves",
            "compiler_occupancy": 8, "num_warps": 4, "matrix": ["v_mfma_f32_32x32x16_bf16"], "uses_dot": True,
            "notes": ["\x1b]0;PWNED-TITLE\x07\x1b[31mESC-INJECTED\x1b[0m"]}


os.write(fd, json.dumps({"rows": [row("gfx950"), row("gfx942")], "problem": None}).encode())
os._exit(0)


def custom_kernel(data):
    return None
