"""What the scheduler side says with a sizing answer (the card part, the adapter's comment, the `sbatch` message,
failure's TIMEOUT and OUT_OF_MEMORY advice) and the memory an HTCondor job held for memory (hold code 34) should
be given: plain functions over an answer row of `POST /size` and over the text of HTCondor events, so that the
wiring on the scheduler side is a call."""

from __future__ import annotations

import math
import re

# `sbatch --time` values are whole minutes; the suggestion rounds up further, to a value a person would type
ROUND_UP = ((3600, 300), (10 * 3600, 1800), (math.inf, 3600))  # below 1 h: 5 min; below 10 h: 30 min; else 1 h
MB = 1.0


def clock(seconds: float) -> str:
    """Seconds as `--time` takes them: H:MM:SS up to a day, D-HH:MM:SS beyond."""
    seconds = int(math.ceil(seconds))
    if seconds <= 86_400:
        return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    days, rest = divmod(seconds, 86_400)
    return f"{days}-{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"


def suggested_time(seconds: float) -> int:
    """The `--time` to suggest for a recommendation of `seconds`: rounded up (ROUND_UP), never below it."""
    step = next(step for below, step in ROUND_UP if seconds < below)
    return int(math.ceil(seconds / step) * step)


def hours(seconds: float) -> str:
    """A rough span for people: '~40 min', '~2 h', '~3 d'."""
    if seconds < 3600:
        return f"~{max(1, round(seconds / 60))} min"
    if seconds < 2 * 86_400:
        return f"~{round(seconds / 3600)} h"
    return f"~{round(seconds / 86_400)} d"


def sbatch_message(row: dict, sooner_s: float | None = None) -> str | None:
    """The line `cli_filter.lua` prints at `sbatch` for a /size answer row, e.g. `asked 24:00:00; 95 % of jobs
    like this ended within 3:10:00; --time=3:30:00 would likely start ~2 h sooner`; `sooner_s`: how much sooner
    the `wait` capability expects the smaller request to start (the clause is left out when unknown or under a
    minute). None where there is nothing to say: no recommendation, or one no smaller than the request."""
    time_s, asked = row.get("time_s"), row.get("time_asked_s")
    if time_s is None or asked is None:
        return None
    suggested = suggested_time(time_s)
    if suggested >= asked:
        return None
    line = (f"asked {clock(asked)}; {percent(row['coverage'])} of jobs like this ended within {clock(time_s)}; "
            f"--time={clock(suggested)}")
    return line + (f" would likely start {hours(sooner_s)} sooner" if sooner_s and sooner_s >= 60 else " would do")


def percent(coverage: float) -> str:
    return f"{100 * coverage:.3g} %"


def card_part(row: dict) -> dict:
    """The job card's `sizing` part: the recommendation beside the request, and the line for people."""
    part = {name: row.get(name) for name in ("time_s", "time_asked_s", "mem_per_cpu_mb", "mem_asked_per_cpu_mb",
                                             "coverage") if row.get(name) is not None}
    part["summary"] = comment(row)
    return part


def comment(row: dict) -> str:
    """The adapter's comment for a /size answer row: `fits --time=3:30:00 --mem-per-cpu=2400M (95 %)`, or why not."""
    if row.get("time_s") is None:
        return row.get("note") or "no recommendation"
    text = f"fits --time={clock(suggested_time(row['time_s']))}"
    if row.get("mem_per_cpu_mb") is not None:
        text += f" --mem-per-cpu={int(math.ceil(row['mem_per_cpu_mb']))}M"
    return f"{text} ({percent(row['coverage'])})"


def failure_advice(outcome: str, row: dict) -> str | None:
    """The values `failure` gives for TIMEOUT and OUT_OF_MEMORY instead of a direction; None where the answer has
    none for that outcome."""
    if outcome == "TIMEOUT" and row.get("time_s") is not None:
        asked = f" (asked {clock(row['time_asked_s'])})" if row.get("time_asked_s") else ""
        return (f"ask for --time={clock(suggested_time(row['time_s']))}: {percent(row['coverage'])} of jobs like "
                f"this ended within {clock(row['time_s'])}{asked}")
    if outcome == "OUT_OF_MEMORY" and row.get("mem_per_cpu_mb") is not None:
        asked = f" (asked {row['mem_asked_per_cpu_mb']:.0f}M)" if row.get("mem_asked_per_cpu_mb") else ""
        return (f"ask for --mem-per-cpu={int(math.ceil(row['mem_per_cpu_mb']))}M: {percent(row['coverage'])} of "
                f"jobs like this used less{asked}")
    return None


# HTCondor: a job over its memory is held with code 34 and a reason naming its limit and peak
HELD_FOR_MEMORY = 34
_LIMIT_PEAK = re.compile(r"memory limit of (\d+) megabytes\.\s*Peak usage: (\d+) megabytes", re.IGNORECASE)
_USAGE = re.compile(r"^\s*(\d+)\s+-\s+MemoryUsage of job \(MB\)", re.MULTILINE)
_RESOURCES = re.compile(r"^\s*Memory \(MB\)\s*:\s*(\d+)\s+(\d+)\s+(\d+)", re.MULTILINE)


def condor_memory(events_text: str) -> dict[str, int]:
    """What a job's HTCondor events say of its memory (MB): `request` (the limit it was held at, or the request
    of a terminate event), `peak` (the largest usage of its hold reason, image-size updates and terminate
    events); a key is absent when no event says it."""
    found: dict[str, int] = {}
    peaks = [int(p) for p in _USAGE.findall(events_text)]
    for limit, peak in _LIMIT_PEAK.findall(events_text):
        found["request"] = int(limit)
        peaks.append(int(peak))
    for usage, request, _allocated in _RESOURCES.findall(events_text):
        peaks.append(int(usage))
        found.setdefault("request", int(request))
    if peaks:
        found["peak"] = max(peaks)
    return found


def condor_request_memory(request_mb: int | None, peak_mb: int | None, recommended_mb: float | None,
                          margin: float, cap_mb: int) -> int | None:
    """The RequestMemory (MB) to give a job held for memory: the larger of the recommendation and the observed
    peak with `margin` (0.2: 20 % more), up to `cap_mb`; None when that is no more than the job already has
    (raising it would not help: release or remove instead)."""
    wanted = [value for value in (recommended_mb, peak_mb * (1 + margin) if peak_mb is not None else None)
              if value is not None and math.isfinite(value) and value > 0]
    if not wanted:
        return None
    new = min(int(math.ceil(max(wanted))), cap_mb)
    return new if request_mb is None or new > request_mb else None
