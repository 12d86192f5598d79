"""Slurm job ids as people write them: `492`, an array task `4_92`, several tasks `4_[1-3,7]`; and the squeue
record that stands for each (a task that has started has a record of its own; the tasks still pending share the
array's record, whose `array_task_string` lists them, e.g. `1,3`, `1-9:2` or `1-100%5`)."""

from __future__ import annotations

import re

from jobaware.errors import JobawareError

MAX_TASKS = 100  # cards asked for at once
ID = re.compile(r"(\d+)(?:_(\d+|\[[0-9,:%-]+\]))?")


def expand(tasks: str, limit: int | None = None) -> list[int]:
    """`1-3,7`, `1-9:2` (a step), `1-100%5` (a throttle, ignored) as task numbers; at most `limit` of them."""
    out: list[int] = []
    for item in tasks.split("%")[0].split(","):
        found = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", item.strip())
        if found is None:
            raise ValueError(f"{item!r} is not N, N-M or N-M:STEP")
        first = int(found.group(1))
        last, step = int(found.group(2) or first), int(found.group(3) or 1)
        if last < first or step < 1:
            raise ValueError(f"{item!r} is an empty range")
        if limit is not None and len(out) + (last - first) // step + 1 > limit:
            raise ValueError(f"more than {limit} tasks")
        out.extend(range(first, last + 1, step))
    return out


def parse_id(text: str) -> tuple[int, list[int] | None]:
    """`492` -> (492, None); `4_92` -> (4, [92]); `4_[1-3]` -> (4, [1, 2, 3]). A one-line error otherwise."""
    found = ID.fullmatch(text.strip())
    if found is None:
        raise JobawareError(f"job id {text!r}: expected N, N_TASK or N_[TASKS] (e.g. 492, 4_92, 4_[1-3,7])")
    job, tasks = int(found.group(1)), found.group(2)
    if tasks is None:
        return job, None
    try:
        return job, expand(tasks.strip("[]"), MAX_TASKS)
    except ValueError as exc:
        raise JobawareError(f"job id {text!r}: {exc}") from None


def number(value) -> int | None:
    value = value.get("number") if isinstance(value, dict) else value
    return value if isinstance(value, int) else None


def find(listed: list[dict], job: int, task: int | None) -> dict | None:
    """The squeue record of job `job` (task None) or of task `task` of array `job`."""
    if task is None:
        return next((r for r in listed if number(r.get("job_id")) == job), None)
    for r in listed:
        if number(r.get("array_job_id")) == job and number(r.get("array_task_id")) == task:
            return r
    for r in listed:  # still pending: the array's own record lists it
        pending = r.get("array_task_string") or ""
        if number(r.get("array_job_id")) == job and pending:
            try:
                if task in expand(pending):
                    return r
            except ValueError:
                continue
    return None
