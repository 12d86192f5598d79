"""What Slurm's accounting says of a finished job's use, as the job store's `usage` dict (`jobaware.usage.measures`).

One `sacct -P` call (with its header line) lists each job's line and its steps' lines (`5`, `5.batch`, `5.0`):
the job's line gives the elapsed time, the time limit, the CPUs allocated, the CPU time of all its steps, the
memory asked (`AllocTRES` where memory is a consumable resource, else `ReqTRES`), the nodes, the exit code and
signal; each step's line its memory: `TRESUsageInTot`'s `mem` (the sum over its tasks of each task's largest
resident size) per node, or `MaxRSS` where that is missing. The job's memory is its largest step's.
"""

from __future__ import annotations

import re

from jobaware.text import ascii_digits

# the fields read, beside those the collector's end-state parser reads (`SACCT_ENDS`); any order, by the header;
# never a field a user writes (JobName, Comment, WorkDir): `-P` prints it as it is, and a line break or `|` in it
# forges records
USAGE_FIELDS = ("JobIDRaw", "JobID", "State", "ExitCode", "ElapsedRaw", "TimelimitRaw", "TotalCPU", "AllocCPUS",
                "AllocTRES", "ReqTRES", "MaxRSS", "TRESUsageInTot", "NNodes")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)$", re.ASCII)  # ASCII: `\d` alone takes `١٢` too
_TO_MIB = {"": 1 / 2**20, "K": 1 / 2**10, "M": 1.0, "G": 2.0**10, "T": 2.0**20, "P": 2.0**30}
_CLOCK = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$", re.ASCII)
_ARRAY_TASK = re.compile(r"^(\d+)_(\d+)$", re.ASCII)


def mib(text: str | None) -> float | None:
    """A size as Slurm prints it (`139352K`, `400M`, `1.5G`; a bare number is bytes) in MiB; None when none."""
    found = _SIZE.match((text or "").strip())
    return round(float(found.group(1)) * _TO_MIB[found.group(2)], 3) if found else None


def seconds(clock: str | None) -> float | None:
    """`[DD-[HH:]]MM:SS[.mmm]` (sacct's TotalCPU) in seconds; None when it is not one."""
    found = _CLOCK.match((clock or "").strip())
    if not found:
        return None
    days, hours, minutes, secs = found.groups()
    return round(int(days or 0) * 86_400 + int(hours or 0) * 3600 + int(minutes) * 60 + float(secs), 3)


def tres(text: str | None) -> dict[str, str]:
    """`cpu=2,mem=400M,node=1,gres/gpu=1` as a dict."""
    return dict(part.split("=", 1) for part in (text or "").split(",") if "=" in part)


def _int(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if ascii_digits(text) else None


def _exit(text: str | None) -> tuple[int | None, int | None]:
    code, _, signal = (text or "").strip().partition(":")
    return (int(code) if ascii_digits(code) else None), (int(signal) if ascii_digits(signal) and int(signal) else None)


def _job_usage(fields: dict[str, str]) -> dict:
    """The job line's part of the usage dict."""
    nodes = _int(fields.get("NNodes")) or 1
    asked = tres(fields.get("AllocTRES")).get("mem") or tres(fields.get("ReqTRES")).get("mem")
    asked_mib = mib(asked)
    limit = _int(fields.get("TimelimitRaw"))  # minutes; UNLIMITED and Partition_Limit read as unknown
    code, signal = _exit(fields.get("ExitCode"))
    usage = {"source": "sacct", "state": (fields.get("State") or "").split(" ")[0] or None,
             "elapsed_s": _int(fields.get("ElapsedRaw")), "time_limit_s": limit * 60 if limit is not None else None,
             "cpus": _int(fields.get("AllocCPUS")), "cpu_time_s": seconds(fields.get("TotalCPU")), "nodes": nodes,
             "gpus": _int(tres(fields.get("AllocTRES")).get("gres/gpu")) or 0,
             "mem_req_mib": round(asked_mib / nodes, 3) if asked_mib else None, "mem_used_mib": None,
             "mem_step": None, "exit_code": code, "signal": signal}
    array = _ARRAY_TASK.match((fields.get("JobID") or "").strip())
    if array:
        usage.update(array_job_id=int(array.group(1)), array_task_id=int(array.group(2)))
    return usage


def _step_memory(fields: dict[str, str]) -> float | None:
    """A step's memory per node: the sum of its tasks' largest resident sizes, else its largest task's."""
    total = mib(tres(fields.get("TRESUsageInTot")).get("mem"))
    nodes = _int(fields.get("NNodes")) or 1
    return round(total / nodes, 3) if total is not None else mib(fields.get("MaxRSS"))


def sacct_usage(parsable: str) -> dict[int, dict]:
    """Job id (JobIDRaw) -> its usage dict, from `sacct -P -o ...` output whose first line is the header naming
    the fields (`USAGE_FIELDS`, with any others). Output without a header, and lines that cannot be read, give
    nothing; a job whose own line is missing is left out."""
    lines = parsable.splitlines()
    if not lines or "JobIDRaw" not in lines[0].split("|"):
        return {}
    header = lines[0].split("|")
    jobs: dict[int, dict] = {}
    steps: dict[int, list[tuple[str, float]]] = {}
    for line in lines[1:]:
        values = line.split("|")
        if len(values) != len(header):
            continue
        fields = dict(zip(header, values, strict=True))
        job, _, step = fields["JobIDRaw"].partition(".")
        if not ascii_digits(job):
            continue
        if not step:
            jobs[int(job)] = _job_usage(fields)
            continue
        memory = _step_memory(fields)
        if memory is not None:
            steps.setdefault(int(job), []).append((step, memory))
    for job, usage in jobs.items():
        if steps.get(job):
            step, memory = max(steps[job], key=lambda s: s[1])
            usage.update(mem_used_mib=memory, mem_step=step)
    return jobs


def sacct_command(*window: str) -> list[str]:
    """The `sacct` call whose output `sacct_usage` reads (jobs and steps, every user), over `window` options."""
    return ["sacct", "--allusers", "-P", "-o", ",".join(USAGE_FIELDS), *window]
