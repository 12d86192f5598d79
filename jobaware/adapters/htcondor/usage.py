"""What an HTCondor terminate event (005) says of a job's use, as the job store's `usage` dict
(`jobaware.usage.measures`), the same shape the Slurm collector keeps.

A terminate event's body holds the CPU time of the last run and of all runs (`Usr D HH:MM:SS, Sys D HH:MM:SS  -
Run Remote Usage`, `... Total Remote Usage`) and the slot's resources (`Partitionable Resources : Usage Request
Allocated [Assigned]`: Cpus, Disk (KB), Memory (MB), GPUs; the Usage column may be blank). The run's wall time is
not in it (its `TimeExecute (s)` line holds a timestamp in the logs seen here): the follower gives it from the job's
last execute event (001), and the wait from the job's submit (000) to its first execute, where it saw them.
"""

from __future__ import annotations

import re

_USAGE = re.compile(r"Usr (\d+) (\d+):(\d+):(\d+), Sys (\d+) (\d+):(\d+):(\d+)\s+-\s+(Run|Total) Remote Usage")
_ROW = re.compile(r"^\s*(Cpus|Disk \(KB\)|Memory \(MB\)|GPUs)\s*:(.*)$", re.MULTILINE)
_END = re.compile(r"\((\d)\) (Normal|Abnormal) termination \((?:return value|signal) (-?\d+)\)")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_NAMES = {"Cpus": "cpus", "Disk (KB)": "disk", "Memory (MB)": "mem", "GPUs": "gpus"}


def _clock(days: str, hours: str, minutes: str, secs: str) -> int:
    return int(days) * 86_400 + int(hours) * 3600 + int(minutes) * 60 + int(secs)


def _row(text: str) -> tuple[float | None, float | None, float | None]:
    """(usage, request, allocated) of one resource row; the Usage column may be blank, an Assigned one follows."""
    numbers = []
    for token in text.split():
        if not _NUMBER.match(token):
            break
        numbers.append(float(token))
    if len(numbers) >= 3:
        return numbers[0], numbers[1], numbers[2]
    if len(numbers) == 2:
        return None, numbers[0], numbers[1]
    return None, None, None


def terminate_usage(raw: str, elapsed_s: float | None = None, wait_s: float | None = None) -> dict:
    """The usage dict of one terminate event's text; `elapsed_s` and `wait_s` as the follower found them."""
    cpu = {kind: _clock(*found[:4]) + _clock(*found[4:8]) for *found, kind in _USAGE.findall(raw)}
    rows = {_NAMES[name]: _row(rest) for name, rest in _ROW.findall(raw)}
    cpus, mem, disk, gpus = (rows.get(k, (None, None, None)) for k in ("cpus", "mem", "disk", "gpus"))
    end = _END.search(raw)
    normal = end is not None and end.group(2) == "Normal"
    value = int(end.group(3)) if end else None
    exit_code = value if normal else None
    signal = value if end and not normal and value and value > 0 else None  # HTCondor writes -1 when unknown
    state = None if end is None else "COMPLETED" if normal and value == 0 else "FAILED"

    def whole(number: float | None) -> int | None:
        return int(number) if number is not None else None

    return {"source": "htcondor", "state": state, "elapsed_s": elapsed_s, "wait_s": wait_s, "time_limit_s": None,
            "cpus": whole(cpus[2] if cpus[2] is not None else cpus[1]), "cpus_req": whole(cpus[1]),
            "cpu_usage": cpus[0], "cpu_time_s": cpu.get("Run"), "total_cpu_time_s": cpu.get("Total"),
            "nodes": None, "gpus": whole(gpus[2]) or 0, "gpu_usage": gpus[0],
            "mem_req_mib": mem[1], "mem_alloc_mib": mem[2], "mem_used_mib": mem[0], "mem_step": None,
            "disk_used_kib": disk[0], "disk_req_kib": disk[1], "disk_alloc_kib": disk[2],
            "exit_code": exit_code, "signal": signal}
