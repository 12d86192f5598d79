"""`wait`'s part of the job card: for a pending job, when it is likely to start, from the queue around it.

The job's squeue record and the queue's (the card's `job` and `queue`) become one `POST /wait` snapshot
(`reader.squeue_body`: running jobs, pending ones in the order Slurm serves them, held ones left out); the answer is
the job's remaining wait: `likely to start in 40 min - 3 h (80%)`.
"""

from __future__ import annotations

import time

from jobaware.card import NotApplicable
from jobaware.wait.reader import HELD, squeue_body, squeue_jobs

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0


def answer(context: dict, ask) -> dict:
    """The job's remaining wait from now (the point, the 80 % range, the 95 % bound) and why, for a pending job
    whose queue is known."""
    record = context.get("job")
    if not isinstance(record, dict) or "job_state" not in record:
        raise NotApplicable("no squeue record of the job")
    [job] = squeue_jobs({"jobs": [record]})
    if job["state"] != "PENDING":
        raise NotApplicable(f"not pending ({job['state'].lower() or 'state unknown'})")
    if job["reason"] in HELD:
        raise NotApplicable(f"held ({job['reason']}): it waits for a person or a date, not for the jobs ahead")
    queue = [r for r in context.get("queue") or [] if isinstance(r, dict)]
    if not queue:
        raise NotApplicable("the queue around it is not known")
    around = squeue_jobs({"jobs": queue})
    records = [record, *(r for r, j in zip(queue, around, strict=True) if j["job_id"] != job["job_id"])]
    seen = [t for j in [job, *around] for t in (j["submit_time"], j["start_time"]) if t is not None]
    now = max([time.time(), *seen])  # a scheduler whose clock runs ahead of this host's: its latest time
    body = squeue_body({"jobs": records}, [job["job_id"]], now=now)
    result = ask.post("/wait", body)
    [prediction] = result["predictions"]
    if prediction["wait_s"] is None:
        raise NotApplicable(prediction["reason"])
    return {"wait_s": prediction["wait_s"], "low_s": prediction["wait_low_s"], "high_s": prediction["wait_high_s"],
            "bound_s": prediction["wait_bound_s"], "why": prediction["reason"], "model_version": result["model_version"]}


def duration(seconds: float) -> str:
    """`45 s`, `40 min`, `2.5 h`, `13 h`, `3 days`: two figures at most, in the unit a person reads."""
    if seconds < MINUTE:
        return f"{seconds:.0f} s"
    if seconds < HOUR:
        return f"{seconds / MINUTE:.0f} min"
    if seconds < 2 * DAY:
        hours = seconds / HOUR
        return f"{hours:.1f} h".replace(".0 h", " h") if hours < 10 else f"{hours:.0f} h"
    days = seconds / DAY
    return f"{days:.1f} days".replace(".0 days", " days") if days < 10 else f"{days:.0f} days"


def span(part: dict) -> str:
    """The 80 % range: `in 40 min - 3 h`, or `within 40 min` when it starts under a minute."""
    if part["low_s"] < MINUTE:
        return f"within {duration(max(part['high_s'], MINUTE))}"
    return f"in {duration(part['low_s'])} - {duration(part['high_s'])}"


def words(part: dict, history: dict) -> str | None:
    """`likely to start in 40 min - 3 h (80%)`."""
    if part["status"] != "ok":
        return None
    return f"likely to start {span(part)} (80%)"


def shown(part: dict) -> str:
    """`start in 40 min - 3 h (80%), within 9 h (95%); 3 jobs ahead in `batch`, 120 processor-hours queued`."""
    return (f"start {span(part)} (80%), within {duration(max(part['bound_s'], MINUTE))} (95%); {part['why']}")
