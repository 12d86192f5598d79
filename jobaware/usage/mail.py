"""The words of the end-of-job mail and of the digest: plain text from `report jobs`' rows."""

from __future__ import annotations

import datetime as dt

from jobaware.text import escaped
from jobaware.usage.jobs import Report, said_text
from jobaware.usage.measures import FAILED, TIMED_OUT, clock, hours, next_request, options, percent, size

FOOTER = "-- \njobaware: what your jobs used against what they asked for (`jobaware report jobs`)."


def _who(row: dict) -> str:
    name = f' "{escaped(row["name"])}"' if row.get("name") else ""  # the user's text: a line break shows as \n
    where = ", ".join(f"{label} {row[key]}" for label, key in (("user", "user"), ("account", "account"),
                                                                ("partition", "partition")) if row.get(key))
    return f"{name} ({where})" if where else name


def _end(row: dict) -> str:
    how = [f"exit code {row['exit_code']}"] if row.get("exit_code") is not None else []
    how += [f"signal {row['signal']}"] if row.get("signal") else []
    return f"{row['state']}" + (f", {', '.join(how)}" if how else "")


def job_lines(row: dict) -> list[str]:
    """One job's efficiency lines, the values to ask for next time and what was said before it ran."""
    lines = [f"Job {row['job']}{_who(row)}: {_end(row)}"]
    wait = f"; waited {clock(row['wait_s'])} in the queue" if row.get("wait_s") is not None else ""
    if row.get("elapsed_s") is not None:
        asked = f" of the {clock(row['time_limit_s'])} asked ({percent(row['time_eff'])})" if row.get("time_limit_s") else ""
        lines.append(f"Time: ran {clock(row['elapsed_s'])}{asked}{wait}")
    if not row.get("accounted"):
        lines.append("Accounting has no record of this job's use: its CPU and memory efficiency are not known.")
    if row.get("cpu_eff") is not None:
        lines.append(f"CPU: {row['cpus']} CPU{'s' if row['cpus'] != 1 else ''}, {clock(row['cpu_time_s'])} of CPU time "
                     f"used of {clock(row['cpus'] * row['elapsed_s'])} allocated ({percent(row['cpu_eff'])})")
    if row.get("mem_used_mib") is not None:
        step = f" (step {row['mem_step']})" if row.get("mem_step") else ""
        asked = f" of {size(row['mem_req_mib'])} asked per node ({percent(row['mem_eff'])})" if row.get("mem_req_mib") else ""
        lines.append(f"Memory: {size(row['mem_used_mib'])} used at most{step}{asked}")
    if row.get("node_hours") is not None:
        lines.append(f"Node-hours: {hours(row['node_hours'])}")
    lines += next_lines(next_request(row))
    if row.get("said"):
        lines.append(f"Before it ran, jobaware said: {said_text(row['said'])}")
    return lines


def next_lines(wanted: dict) -> list[str]:
    asked = options(wanted)
    lines = [f"Next time, ask for: {asked} (this run's use plus a fifth, rounded up)"] if asked else []
    return lines + [f"Note: {note}" for note in wanted["notes"]]


def _spread(distribution: dict | None, as_percent: bool = True) -> str:
    if not distribution:
        return "-"
    shown = percent if as_percent else clock
    return (f"median {shown(distribution['median'])} (10th-90th percentile {shown(distribution['p10'])}-"
            f"{shown(distribution['p90'])})")


def array_lines(row: dict) -> list[str]:
    """An array's lines: its tasks' ends, each efficiency's distribution, the values to ask for next time by its
    longest and largest task."""
    spread = row["distribution"]
    lines = [f"Array {row['job']}{_who(row)}: {row['tasks']:,} tasks: {row['state']}"]
    lines.append(f"Time: {_spread(spread['time_eff'])} of the {clock(row['time_limit_s'])} asked; longest "
                 f"{clock((spread['elapsed_s'] or {}).get('max'))}")
    lines.append(f"CPU: {_spread(spread['cpu_eff'])} of {row['cpus']} CPU{'s' if row['cpus'] != 1 else ''}")
    lines.append(f"Memory: {_spread(spread['mem_eff'])} of {size(row['mem_req_mib'])} asked per node; largest "
                 f"{size((spread['mem_used_mib'] or {}).get('max'))}")
    lines.append(f"Node-hours: {hours(row['node_hours'])}")
    states = row["states"]
    worst = {"state": next((s for s in (*TIMED_OUT, "OUT_OF_MEMORY") if states.get(s)), "COMPLETED"),
             "elapsed_s": (spread["elapsed_s"] or {}).get("max"), "time_limit_s": row["time_limit_s"],
             "mem_used_mib": (spread["mem_used_mib"] or {}).get("max"), "mem_req_mib": row["mem_req_mib"]}
    lines += next_lines(next_request(worst))
    if row.get("said"):
        lines.append(f"Before it ran, jobaware said: {said_text(row['said'])}")
    return lines


def row_lines(row: dict) -> list[str]:
    return array_lines(row) if row["tasks"] > 1 or "distribution" in row else job_lines(row)


def end_of_job(rows: list[dict], note: str | None = None) -> str:
    """The body of the end-of-job mail: each row's lines (one job, or an array), and `note` (why a part is
    missing)."""
    parts = ["\n".join(row_lines(row)) for row in rows]
    if note:
        parts.append(note)
    return "\n\n".join(parts + [FOOTER]) + "\n"


def _day(epoch: float | None, none: str) -> str:
    return none if epoch is None else dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M")


def period(since: float | None, until: float | None) -> str:
    """`from 2026-05-01 00:00 to 2026-05-08 00:00` (local time)."""
    return f"from {_day(since, 'the beginning')} to {_day(until, 'now')}"


def digest(whose: str, found: Report, since: float | None, until: float | None, worst: int = 5) -> str:
    """The digest of one user's (or account's) finished jobs over a period: counts, efficiencies, failed work,
    the jobs that used least of what they asked with the values to ask for next time."""
    when = period(since, until)
    if not found.jobs:
        return f"No job of {whose} finished {when}.\n\n{FOOTER}\n"
    states = ", ".join(f"{n} {s}" for s, n in found.states.most_common())
    points = found.points

    def median(name: str) -> str:
        values = sorted(points[name])
        return percent(values[len(values) // 2]) if values else "-"

    lines = [f"Jobs of {whose} {when}: {found.jobs:,} ({states}); {hours(found.node_hours)} node-hours",
             f"Median efficiency: time {median('time_eff')} of the limit asked, CPU {median('cpu_eff')}, "
             f"memory {median('mem_eff')} of what was asked"]
    lost = found.failed_node_hours + found.timeout_node_hours
    if lost:
        lines.append(f"Failed and timed-out jobs used {hours(lost)} node-hours ({hours(found.failed_node_hours)} "
                     f"failed, {hours(found.timeout_node_hours)} timed out)")
    if found.unaccounted:
        lines.append(f"{found.unaccounted} job(s) without accounting data (efficiency unknown)")
    listed = sorted(found.rows, key=_waste, reverse=True)[:worst]
    if listed:
        lines += ["", f"The {len(listed)} job(s) that left most of what they asked unused:"]
        for row in listed:
            lines += ["", *row_lines(row)]
    if found.not_listed:
        lines.append(f"\n({found.not_listed:,} more jobs not listed; `jobaware report jobs` shows every one)")
    judged = [item for row in found.rows for item in row.get("said") or [] if item.get("right") is not None]
    if judged:
        right = sum(item["right"] for item in judged)
        lines.append(f"\nWhat jobaware said before they ran came true for {right} of {len(judged)} predictions.")
    return "\n".join(lines) + f"\n\n{FOOTER}\n"


def _waste(row: dict) -> float:
    """The node-hours a row left unused: all of a failed or timed-out job's, an idle share of the others'."""
    hours = row.get("node_hours") or 0.0
    if row.get("state") in (*FAILED, *TIMED_OUT):
        return hours
    cpu = row.get("cpu_eff")
    return hours * (1 - min(cpu, 1.0)) if cpu is not None else 0.0
