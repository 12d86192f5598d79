"""Standard Workload Format traces (Parallel Workloads Archive) mapped onto the canonical job table.

The trace itself (header, time zone, queue and partition names, the 18 fields, partial executions folded, bad
lines quarantined) is read by the platform's `jobaware.swf`; this module maps its jobs onto `failure`'s table.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.jobtable.common import Batch, to_canonical_dtypes
from jobaware.reading import Problem
from jobaware.swf import read_swf

STATUS = {0: "FAILED", 1: "COMPLETED", 5: "CANCELLED"}


def iter_swf(path: Path, require_state: bool = False) -> Iterator[Batch]:
    trace = read_swf(path)
    raw, header, known = trace.jobs, trace.header, trace.known
    problems, quarantined = list(trace.problems), list(trace.quarantined)
    submit = raw["submit"]
    start = submit + known("wait")
    procs = known("procs_req").fillna(known("procs_alloc"))
    names = lambda col, table, prefix: known(col).map(  # noqa: E731
        lambda v: table.get(int(v), f"{prefix}{int(v)}"), na_action="ignore"
    )
    frame = pd.DataFrame(
        {
            "job_id": raw["job"].astype("int64"),
            "user": known("user").map(lambda v: f"user{int(v)}", na_action="ignore"),
            "account": known("group").map(lambda v: f"group{int(v)}", na_action="ignore"),
            "partition": names("partition", header.partitions, "partition"),
            "qos": names("queue", header.queues, "queue"),
            "wallclock_req": known("time_req"),
            "nodes_req": np.nan,
            "processors_req": procs,
            "gpus_req": np.nan,
            "mem_req": known("mem_req") * procs / 1024.0,
            "submit_time": header.local_times(submit),
            "start_time": header.local_times(start),
            "end_time": header.local_times(raw["end"]),
            "run_time": known("run"),
            "state": raw["status"].map(lambda s: STATUS.get(int(s)), na_action="ignore"),
            "name": known("executable").map(lambda v: f"exe{int(v)}", na_action="ignore"),
            "work_dir": None,
            "submit_line": None,
        }
    )
    if require_state:
        missing = frame["state"].isna().to_numpy()
        for i in np.flatnonzero(missing)[:20]:
            problems.append(Problem(str(path), int(raw["line"].iloc[i]), "status", str(int(raw["status"].iloc[i])), "no final state"))
        quarantined += [{"file": str(path), "line": int(raw["line"].iloc[i])} for i in np.flatnonzero(missing)]
        frame = frame.loc[~missing]
    yield Batch(to_canonical_dtypes(frame.reset_index(drop=True)), problems, quarantined)
