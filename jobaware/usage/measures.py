"""A finished job's use, as the job store keeps it (`record["usage"]`), and what it says.

The usage dict (the same keys from Slurm's accounting and from HTCondor's terminate events; a value is None where
the source does not say it):
  source          `sacct` or `htcondor`
  state           the end state the source gives (Slurm's word; HTCondor: COMPLETED, or FAILED for a non-zero
                  return value or a signal)
  elapsed_s       the run's wall time;  time_limit_s  the limit it asked for
  cpus            CPUs allocated;  cpu_time_s  CPU time (user + system) of all its steps (HTCondor: of the last run)
  mem_req_mib     memory asked per node (HTCondor: the slot's request);  mem_used_mib  the largest use per node
                  (Slurm: the largest step's, `mem_step` names it)
  nodes, gpus     nodes (HTCondor: None, a slot) and GPUs allocated
  exit_code, signal   how it ended
  array_job_id, array_task_id   (Slurm, an array's task only)
  HTCondor also: wait_s, cpus_req, cpu_usage, total_cpu_time_s, gpu_usage, mem_alloc_mib, disk_used_kib,
  disk_req_kib, disk_alloc_kib

`facts` (what happened to a job: the usage dict with the store's final state and the times of its record) is what
`efficiencies`, `next_request` and the parts' `after` read.
"""

from __future__ import annotations

import math

FAILED = ("FAILED", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL")  # end states counted as failed work
TIMED_OUT = ("TIMEOUT", "DEADLINE")
MARGIN = 1.2  # the values to ask for next time: this run's use plus a fifth
TIME_STEPS = ((3600, 300), (6 * 3600, 900), (math.inf, 3600))  # below 1 h: 5 min steps; below 6 h: 15 min; 1 h
MEM_STEPS = ((1024, 64), (8192, 256), (math.inf, 1024))  # MiB: below 1 GiB: 64 MiB steps; below 8 GiB: 256; 1 GiB
LOW_CPU = 0.5  # below this CPU efficiency a job with several CPUs is told how many it kept busy


CENTURY = 100 * 365 * 86_400
# each measure's largest believable value (seconds, CPUs, nodes, GPUs, MiB per node: a pebibyte)
BOUNDS = {"elapsed_s": CENTURY, "time_limit_s": CENTURY, "cpu_time_s": 10**7 * CENTURY, "cpus": 10**7,
          "nodes": 10**7, "gpus": 10**7, "mem_req_mib": 2**30, "mem_used_mib": 2**30}
# CPU time beyond this many times what the CPUs allocated could give over the run (and a minute of rounding) is
# accounting gone wrong, not a job: a job that escapes its cores' confinement may pass 1, never this
CPU_SLACK = 2.0


def measured(facts: dict) -> dict:
    """`facts` with each of the BOUNDS' measures that is not a number from 0 to its bound (a damaged record's -100,
    NaN, '100', 1e12 s), and a CPU time beyond CPU_SLACK x CPUs x elapsed, read as unknown rather than shown or
    summed as a wrong number."""
    def fit(name: str, value):
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        return value if number and 0 <= value <= BOUNDS[name] else None

    checked = {**facts, **{name: fit(name, facts.get(name)) for name in BOUNDS}}
    cpus, elapsed, cpu_time = checked["cpus"], checked["elapsed_s"], checked["cpu_time_s"]
    if cpu_time is not None and cpus and elapsed is not None and cpu_time > CPU_SLACK * cpus * elapsed + 60:
        checked["cpu_time_s"] = None
    return checked


def _share(used: float | None, of: float | None) -> float | None:
    return used / of if used is not None and of else None


def efficiencies(facts: dict) -> dict:
    """time_eff (elapsed / limit), cpu_eff (CPU time / (CPUs x elapsed)), mem_eff (largest use / asked), and the
    hours: node_hours, cpu_hours, idle_cpu_hours (allocated CPU time not used), unused_time_node_hours (the limit
    asked but not used, times the nodes), unused_mem_gib_hours (memory asked but not used, times the elapsed)."""
    elapsed, cpus, nodes = facts.get("elapsed_s"), facts.get("cpus"), facts.get("nodes")
    cpu_time, limit = facts.get("cpu_time_s"), facts.get("time_limit_s")
    asked, used = facts.get("mem_req_mib"), facts.get("mem_used_mib")
    hours = elapsed / 3600 if elapsed is not None else None
    cpu_eff = _share(cpu_time, cpus * elapsed if cpus and elapsed else None)
    return {
        "time_eff": _share(elapsed, limit), "cpu_eff": cpu_eff, "mem_eff": _share(used, asked),
        "node_hours": nodes * hours if nodes and hours is not None else None,
        "cpu_hours": cpus * hours if cpus and hours is not None else None,
        "idle_cpu_hours": max(0.0, cpus * hours - cpu_time / 3600) if cpu_eff is not None else None,
        "unused_time_node_hours": (nodes or 1) * max(0.0, limit - elapsed) / 3600
        if limit is not None and elapsed is not None and nodes else None,
        "unused_mem_gib_hours": (nodes or 1) * max(0.0, asked - used) / 1024 * hours
        if asked is not None and used is not None and hours is not None else None,
    }


def _round_up(value: float, steps: tuple) -> int:
    step = next(step for below, step in steps if value < below)
    return int(math.ceil(value / step) * step)


def clock(seconds: float | None) -> str:
    """`H:MM:SS`, or `D-HH:MM:SS` from a day on (as `--time` takes it); `-` for None."""
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86_400)
    text = f"{rest // 3600}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}" if days else text


def size(mib: float | None) -> str:
    """`340 MiB`, `1.2 GiB`; `-` for None."""
    if mib is None:
        return "-"
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def mem_option(mib: int) -> str:
    """`--mem` as Slurm takes it: `2G`, `640M`."""
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"


def percent(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.0f}%"


def next_request(facts: dict) -> dict:
    """The values to ask for next time by this run's use (`MARGIN` more, rounded up), each only where it is less
    than what was asked: `time_s`, `mem_mib` (per node), `cpus`; and `notes`, one line each, where the run says
    more was needed (it ran out of time or memory) or says nothing (it failed; no accounting)."""
    state, elapsed, limit = facts.get("state"), facts.get("elapsed_s"), facts.get("time_limit_s")
    asked, used = facts.get("mem_req_mib"), facts.get("mem_used_mib")
    cpus, cpu_time = facts.get("cpus"), facts.get("cpu_time_s")
    wanted: dict = {"time_s": None, "mem_mib": None, "cpus": None, "notes": []}
    if state in FAILED and state != "OUT_OF_MEMORY":
        wanted["notes"].append(f"it ended {state}: its use says little of what a run to the end needs")
        return wanted
    if state in TIMED_OUT:
        wanted["notes"].append(f"it ran out of time at its limit of {clock(limit)}: ask for more --time")
    elif elapsed:
        time_s = max(300, _round_up(elapsed * MARGIN, TIME_STEPS))
        if limit is None or time_s < limit:
            wanted["time_s"] = time_s
    if state == "OUT_OF_MEMORY":
        wanted["notes"].append(f"it ran out of memory ({size(used)} used of {size(asked)}): ask for more --mem")
    elif used:
        mem = max(64, _round_up(used * MARGIN, MEM_STEPS))
        if asked is None or mem < asked:
            wanted["mem_mib"] = mem
    cpu_eff = efficiencies(facts)["cpu_eff"]
    if cpus and cpus > 1 and cpu_eff is not None and cpu_eff < LOW_CPU and elapsed:
        wanted["cpus"] = max(1, math.ceil(cpu_time / elapsed * MARGIN))
    if used is None and elapsed is None:
        wanted["notes"].append("accounting has no record of its use")
    return wanted


def options(wanted: dict) -> str:
    """`--time=0:10:00 --mem=2G, 2 CPUs` of `next_request`'s values ('' when none)."""
    parts = []
    if wanted["time_s"] is not None:
        parts.append(f"--time={clock(wanted['time_s'])}")
    if wanted["mem_mib"] is not None:
        parts.append(f"--mem={mem_option(wanted['mem_mib'])}")
    cpus = f"{wanted['cpus']} CPU{'s' if wanted['cpus'] != 1 else ''}" if wanted["cpus"] is not None else ""
    return ", ".join(filter(None, [" ".join(parts), cpus]))


def hours(value: float | None) -> str:
    """Hours as a table shows them: two decimals below 10, one below 1,000, whole beyond."""
    if value is None:
        return "-"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 1000 else f"{value:,.0f}"
