"""What the scheduler side says with a sizing answer (the card part, the adapter's comment, the `sbatch` message,
failure's TIMEOUT and OUT_OF_MEMORY advice): plain functions over an answer row of `POST /size`, so that the wiring
on the scheduler side is a call."""

from __future__ import annotations

import math

# `sbatch --time` values are whole minutes; the suggestion rounds up further, to a value a person would type
ROUND_UP = ((3600, 300), (10 * 3600, 1800), (math.inf, 3600))  # below 1 h: 5 min; below 10 h: 30 min; else 1 h


def clock(seconds: float) -> str:
    """Seconds as `--time` takes them: H:MM:SS up to a day, D-HH:MM:SS beyond."""
    seconds = int(math.ceil(seconds))
    if seconds <= 86_400:
        return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    days, rest = divmod(seconds, 86_400)
    return f"{days}-{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"


def suggested_time(seconds: float, asked: float | None = None) -> int:
    """The `--time` to suggest for a recommendation of `seconds`: rounded up (ROUND_UP), never below it; where that
    would pass the request `asked`, rounded up to the minute only (and never above the request)."""
    step = next(step for below, step in ROUND_UP if seconds < below)
    value = int(math.ceil(seconds / step) * step)
    if asked is not None and value > asked:
        value = min(int(math.ceil(seconds / 60) * 60), int(asked))
    return value


def hours(seconds: float) -> str:
    """A rough span for people: '~40 min', '~2 h', '~3 d'."""
    if seconds < 3600:
        return f"~{max(1, round(seconds / 60))} min"
    if seconds < 2 * 86_400:
        return f"~{round(seconds / 3600)} h"
    return f"~{round(seconds / 86_400)} d"


def smaller_time(row: dict) -> int | None:
    """The `--time` to suggest where the answer recommends less than the job asked; None where it recommends
    nothing or the request itself (sizing never recommends more than a job asked)."""
    time_s, asked = row.get("time_s"), row.get("time_asked_s")
    if time_s is None or asked is None:
        return None
    suggested = suggested_time(time_s, asked)
    return suggested if suggested < asked else None


def sbatch_message(row: dict, sooner_s: float | None = None) -> str | None:
    """The line `cli_filter.lua` prints at `sbatch` for a /size answer row, e.g. `jobs like this asking 24:00:00:
    92 % ended within 3:10:00; --time=3:30:00 would likely start ~2 h sooner` (the share is the job's own
    `time_fit`); `sooner_s`: how much sooner the `wait` capability expects the smaller request to start (the clause
    is left out when unknown or under a minute). None where there is nothing to say: no recommendation, or one no
    smaller than the request. The line names the request it was made for: the cache gives it to any job of the
    same shape (times within a factor of two) or the nearest one, whose own `--time` may differ."""
    suggested = smaller_time(row)
    if suggested is None:
        return None
    line = (f"jobs like this asking {clock(row['time_asked_s'])}: {percent(fit(row, 'time_fit'))} ended within "
            f"{clock(row['time_s'])}; --time={clock(suggested)}")
    return line + (f" would likely start {hours(sooner_s)} sooner" if sooner_s and sooner_s >= 60 else " would do")


SOONER_MIN_S = 300.0  # a start sooner by less than this is not worth a clause
SOONER_SHARE = 0.1  # nor one sooner by less than this share of the wait as asked


def sooner(part: dict) -> float | None:
    """How much sooner the suggested `--time` would likely start: the wait `wait` expects for the job as asked
    (`wait_asked_s`) less the one with the suggestion (`wait_recommended_s`), where that is meaningful (at least
    SOONER_MIN_S and SOONER_SHARE of the wait as asked); None otherwise, or where `wait` said nothing."""
    asked, recommended = part.get("wait_asked_s"), part.get("wait_recommended_s")
    if asked is None or recommended is None:
        return None
    gained = asked - recommended
    return gained if gained >= max(SOONER_MIN_S, SOONER_SHARE * asked) else None


def fit(row: dict, key: str) -> float:
    """A recommendation's estimated probability of being met (the share all recommendations meet, where an answer
    has no such field)."""
    return row[key] if row.get(key) is not None else row["coverage"]


def percent(probability: float) -> str:
    return f"{100 * probability:.3g} %"


def card_part(row: dict) -> dict:
    """The job card's `sizing` part: the recommendation beside the request, and the line for people."""
    part = {name: row.get(name) for name in ("time_s", "time_asked_s", "time_fit", "mem_per_cpu_mb",
                                             "mem_asked_per_cpu_mb", "mem_fit", "coverage")
            if row.get(name) is not None}
    part["summary"] = comment(row)
    return part


def comment(row: dict) -> str:
    """The adapter's comment for a /size answer row: `fits --time=3:30:00 (92 %) --mem-per-cpu=2390M (97 %)`, each
    part where it is smaller than the request; `no smaller request is sure enough` where neither is; or why there
    is no recommendation."""
    if row.get("time_s") is None:
        return row.get("note") or "no recommendation"
    parts = []
    if (suggested := smaller_time(row)) is not None:
        parts.append(f"--time={clock(suggested)} ({percent(fit(row, 'time_fit'))})")
    if smaller_memory(row):
        parts.append(f"--mem-per-cpu={int(math.ceil(row['mem_per_cpu_mb']))}M ({percent(fit(row, 'mem_fit'))})")
    return "fits " + " ".join(parts) if parts else "no smaller request is sure enough"


def smaller_memory(row: dict) -> bool:
    mem, asked = row.get("mem_per_cpu_mb"), row.get("mem_asked_per_cpu_mb")
    return mem is not None and (asked is None or math.ceil(mem) < asked)


REMEDIED = ("TIMEOUT", "OUT_OF_MEMORY")  # the ways of failing sizing's values speak to


def remedies(row: dict) -> dict[str, str]:
    """What to ask for, by the way of failing it answers (`failure_advice`), where the answer has something: the
    card part's `remedies`, which `failure`'s part takes by its likely failure."""
    return {outcome: text for outcome in REMEDIED if (text := failure_advice(outcome, row))}


def failure_advice(outcome: str, row: dict) -> str | None:
    """The values `failure` gives for TIMEOUT and OUT_OF_MEMORY instead of a direction; where sizing gives the job
    its request back, the direction stays (ask for more) with the value asked and why nothing smaller is offered
    (sizing recommends nothing above a request: a run stopped at its limit never shows how much more it needed).
    For TIMEOUT where jobs like this one end within a shorter limit, it never advises that shorter limit against
    the flag: it says how long they take and that a run that outlasts them is more likely stuck. None where the
    answer has nothing for that outcome."""
    if outcome == "TIMEOUT" and row.get("time_s") is not None:
        asked = f" (asked {clock(row['time_asked_s'])})" if row.get("time_asked_s") else ""
        if smaller_time(row) is None:
            return (f"ask for more --time{asked}: no shorter limit is safe for jobs like this, and a job stopped at "
                    "its limit never shows how much more it needed")
        # the job is flagged to run out of time, yet jobs like it end well within a shorter limit: never advise a
        # shorter --time against the flag; a run that outlasts its peers this much is more often stuck than short
        return (f"check that it makes progress: {percent(fit(row, 'time_fit'))} of jobs like this ended within "
                f"{clock(row['time_s'])}{asked}, so running out of time is more likely a hang than too short a limit")
    if outcome == "OUT_OF_MEMORY" and row.get("mem_per_cpu_mb") is not None:
        asked = f" (asked {row['mem_asked_per_cpu_mb']:.0f}M)" if row.get("mem_asked_per_cpu_mb") else ""
        if not smaller_memory(row):
            return (f"ask for more --mem-per-cpu{asked}: no smaller value is safe for jobs like this, and a job "
                    "stopped at its limit never shows how much more it needed")
        return (f"ask for --mem-per-cpu={int(math.ceil(row['mem_per_cpu_mb']))}M: {percent(fit(row, 'mem_fit'))} of "
                f"jobs like this used less{asked}")
    return None

