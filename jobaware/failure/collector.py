"""Collect finished Slurm jobs by polling `squeue --json` into an NREL-format CSV that training reads."""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from jobaware.errors import InputError
from jobaware.failure.readers import read_jobs
from jobaware.failure.readers.common import JobColumns
from jobaware.failure.readers.slurm import FieldError, from_squeue
from jobaware.failure.schema import UNFINISHED
from jobaware.failure.writers import NrelWriter

SQUEUE = ("squeue", "--json", "--states=all")


def poll(command: Sequence[str] = SQUEUE, env: dict | None = None) -> pd.DataFrame:
    """One `squeue --json` poll as a canonical table."""
    try:
        result = subprocess.run(list(command), capture_output=True, text=True, env=env, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"{command[0]}: could not run ({exc})") from None
    if result.returncode != 0:
        raise InputError(f"{' '.join(command)} failed: {result.stderr.strip() or result.returncode}")
    try:
        jobs = json.loads(result.stdout)["jobs"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise InputError(f"{' '.join(command)}: output is not squeue --json output") from None
    rows = []
    for job in jobs:
        try:
            rows.append(from_squeue(job))
        except (FieldError, AttributeError) as exc:  # left out of this poll, named in the log; squeue shows it again
            logging.getLogger(__name__).warning("squeue job %s left out: %s", str(job.get("job_id"))[:40]
                                                if isinstance(job, dict) else "?", exc)
    return JobColumns.from_rows(rows).frame()


def finished(jobs: pd.DataFrame) -> pd.DataFrame:
    state = jobs["state"].astype("object")
    return jobs[jobs["end_time"].notna() & state.notna() & ~state.isin(UNFINISHED)]


def collect(out: str | Path, polls: int, interval: float, command: Sequence[str] = SQUEUE, env: dict | None = None,
            on_poll: Callable[[int], None] | None = None) -> int:
    """Poll `polls` times, `interval` seconds apart; append each newly finished job once. Returns how many."""
    out = Path(out)
    seen: set[tuple[int, str]] = set()
    if out.exists() and out.stat().st_size:
        earlier, _ = read_jobs(out)
        seen = set(zip(earlier["job_id"].astype(int), earlier["submit_time"].astype(str), strict=True))
    added = 0
    writer = NrelWriter(out, "csv", append=True)
    try:
        for i in range(polls):
            jobs = finished(poll(command, env))
            keys = list(zip(jobs["job_id"].astype(int), jobs["submit_time"].astype(str), strict=True))
            new = [k not in seen for k in keys]
            if any(new):
                writer.write(jobs[new])
                writer.handle.flush()
                seen.update(k for k, fresh in zip(keys, new, strict=True) if fresh)
                added += sum(new)
            if on_poll:
                on_poll(added)
            if i < polls - 1:
                time.sleep(interval)
    finally:
        writer.close()
    return added
