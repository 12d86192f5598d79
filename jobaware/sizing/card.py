"""`sizing`'s part of the job card: the time limit and memory per processor the job would likely fit within, beside
what it asked, from the request of the job's record (an `squeue --json` record or a canonical row, as the card's
context holds it). The words say what to ask for only where that is less than the job asked:
`ask --time=3:30:00 --mem-per-cpu=2390M (asked 24:00:00, 4096M)`.

Where the suggested `--time` is shorter, the part asks the `wait` capability's card part (`ask.part`, by its key:
the card's one way for a part to ask another, with no import of its slice) for the job as asked and as suggested,
and says how much sooner it would likely start: `... would likely start ~2 h sooner`. Without a `wait` part that
answers both (not registered, switched off, down, or the job not pending in a known queue) it says nothing of
waiting. Its `remedies` are the values `failure`'s part gives for TIMEOUT and OUT_OF_MEMORY instead of a
direction."""

from __future__ import annotations

import math

from jobaware.card import NotApplicable
from jobaware.sizing.advice import (
    card_part,
    clock,
    hours,
    remedies,
    sbatch_message,
    smaller_memory,
    smaller_time,
    sooner,
)

WAIT = "wait"  # the capability whose card part says when a pending job is likely to start (its `wait_s`)
NO_VAL = 4_294_967_294  # Slurm's 32-bit "not set" (INFINITE is one more): how 22.05 writes a limit it has not


def _number(value) -> float | None:
    """A number of a job record: plain, or Slurm's `{"set": true, "infinite": false, "number": n}`; None when
    unset, infinite (wrapped, or 22.05's raw NO_VAL and INFINITE), not a number or not above 0."""
    if isinstance(value, dict):
        if value.get("set") is False or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < NO_VAL:
        return None
    return float(value)


def _text(value) -> str | None:
    return str(value)[:256] if value not in (None, "") else None


def request_of(job: dict) -> dict:
    """The `/size` body's job for a record: an `squeue --json` record (`time_limit` in minutes, `memory_per_cpu`
    or `memory_per_node` in MB) or a canonical row (`wallclock_req` in seconds, `mem_req` in MB for the job)."""
    if "user_name" in job or "time_limit" in job:  # squeue --json
        procs, nodes = _number(job.get("cpus")), _number(job.get("node_count")) or 1.0
        minutes, per_cpu, per_node = (_number(job.get(field)) for field in ("time_limit", "memory_per_cpu",
                                                                             "memory_per_node"))
        time_s = minutes * 60 if minutes else None
        mem = per_cpu or (per_node * nodes / procs if per_node and procs else None)
        user, group, name, queue = (job.get(field) for field in ("user_name", "account", "name", "partition"))
    else:  # a canonical row
        procs, time_s, total = (_number(job.get(field)) for field in ("processors_req", "wallclock_req", "mem_req"))
        mem = total / procs if total and procs else None
        user, group, name, queue = (job.get(field) for field in ("user", "account", "name", "partition"))
    if not _text(user):
        raise NotApplicable("no user in the job record")
    request = {"user": _text(user), "group": _text(group), "name": _text(name), "queue": _text(queue),
               "procs": int(procs) if procs else None, "time_asked_s": time_s, "mem_asked_per_cpu_mb": mem,
               "submit_time": _number(job.get("submit_time"))}
    job_id = job.get("job_id")
    if isinstance(job_id, int) and not isinstance(job_id, bool) and job_id >= 0:
        request["job_id"] = job_id
    return {name: value for name, value in request.items() if value is not None}


def answer(context: dict, ask) -> dict:
    """The recommendation for the job's request (`/size`), its probabilities and the coverage."""
    job = context.get("job")
    if not job:
        raise NotApplicable("no job record")
    result = ask.post("/size", {"jobs": [request_of(job)]})
    row = result["results"][0]
    return {**card_part(row), **({"note": row["note"]} if row.get("note") else {}),
            **({"remedies": found} if (found := remedies(row)) else {}), **waits(context, row, ask),
            "model_version": result["model_version"]}


def shorter_record(job: dict, seconds: int) -> dict:
    """The job's squeue record asking `seconds` of time (whole minutes, in the record's own form: a plain number or
    Slurm's `{"set", "infinite", "number"}`)."""
    minutes = int(math.ceil(seconds / 60))
    limit = job["time_limit"]
    return {**job, "time_limit": {**limit, "set": True, "infinite": False, "number": minutes}
            if isinstance(limit, dict) else minutes}


def waits(context: dict, row: dict, ask) -> dict:
    """The waits the `wait` part expects for the job as asked (`wait_asked_s`) and with the suggested `--time`
    (`wait_recommended_s`), from one model version; {} where no shorter time is suggested, the record is no squeue
    record, or the `wait` part does not answer both."""
    suggested, job = smaller_time(row), context["job"]
    if suggested is None or "time_limit" not in job:
        return {}
    asked = ask.part(WAIT, context)
    if asked["status"] != "ok":
        return {}
    recommended = ask.part(WAIT, {**context, "job": shorter_record(job, suggested)})
    if recommended["status"] != "ok" or recommended.get("model_version") != asked.get("model_version"):
        return {}
    return {"wait_asked_s": asked["wait_s"], "wait_recommended_s": recommended["wait_s"]}


def _megabytes(mb: float) -> str:
    return f"{int(math.ceil(mb))}M"


def words(part: dict, history: dict) -> str | None:
    """`ask --time=3:30:00 --mem-per-cpu=2390M (asked 24:00:00, 4096M): likely starts ~2 h sooner`: each value where
    it is less than the job asked, and the start gained where it is meaningful; None where nothing smaller is sure
    enough or there is no recommendation."""
    if part["status"] != "ok":
        return None
    asks, asked = [], []
    if (suggested := smaller_time(part)) is not None:
        asks.append(f"--time={clock(suggested)}")
        asked.append(clock(part["time_asked_s"]))
    if smaller_memory(part) and part.get("mem_asked_per_cpu_mb") is not None:
        asks.append(f"--mem-per-cpu={_megabytes(part['mem_per_cpu_mb'])}")
        asked.append(_megabytes(part["mem_asked_per_cpu_mb"]))
    if not asks:
        return None
    return f"ask {' '.join(asks)} (asked {', '.join(asked)})" + _started(part)


def _started(part: dict) -> str:
    gained = sooner(part)
    return f": likely starts {hours(gained)} sooner" if gained is not None else ""


def shown(part: dict) -> str:
    """`jobaware card`'s cell: the summary (`fits --time=3:30:00 (92 %): likely starts ~2 h sooner`, or why there
    is nothing)."""
    return part["summary"] + _started(part)


def advice(part: dict, history: dict) -> str | None:
    """At `sbatch`: `jobs like this asking 24:00:00: 92 % ended within 3:10:00; --time=3:30:00 would likely start
    ~2 h sooner` (`would do` where `wait` said nothing or too little)."""
    if part["status"] != "ok":
        return None
    return sbatch_message(part, sooner(part))
