"""Decision instances: one per hold (012 JOB_HELD), labelled by what became of the job.

Label rule. A hold's label comes from the job's first terminal event after it (in log order):
  - `release`: 005 JOB_TERMINATED with normal termination (the job was released and then ran to its end;
    a job that is held cannot terminate, so a normal termination after a hold implies a release);
  - `remove`: 009 JOB_ABORTED (removed by the user or a policy) or 005 with abnormal termination (a signal).
  With `nonzero_exit_is_failure`, a normal termination with a non-zero return value counts as `remove` too
  (off by default: the issue's rule and the seed project's count any normal termination).
Re-held jobs: a job held again before it resolves gives every hold of the chain the chain's outcome (the
first terminal event after each hold); `reheld` marks the holds that were followed by another hold first.
Unresolved: a hold with no terminal event after it before the log ends has no label (None); it is kept
as a decision instance (the service decides such holds) but never enters training or evaluation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from jobaware.hold.events import JOB_ABORTED, JOB_HELD, JOB_TERMINATED, hold_reason_words

JOB = ["cluster", "proc", "subproc"]

CLEARS_HOLD = (1, 5, 9, 13)  # execute, terminated, aborted, released: after these a hold is no longer current


def current_holds(events: pd.DataFrame, table: pd.DataFrame) -> np.ndarray:
    """Mask over `table`: holds that still stand at the end of the events (nothing after them cleared them)."""
    order = events.sort_values("seq", kind="stable")
    clearing = order[order["event_code"].isin(CLEARS_HOLD)]
    last_clear = clearing.groupby(["cluster", "proc", "subproc"])["seq"].max()
    last_hold = table.groupby(["cluster", "proc", "subproc"])["hold_seq"].transform("max")
    keyed = pd.MultiIndex.from_frame(table[["cluster", "proc", "subproc"]])
    cleared_after = last_clear.reindex(keyed).to_numpy(dtype=float)
    return ((table["hold_seq"] == last_hold).to_numpy()
            & ~(cleared_after > table["hold_seq"].to_numpy(dtype=float)))


def job_order(events: pd.DataFrame) -> np.ndarray:
    """Row positions of `events` sorted by job, then log order (seq)."""
    return np.lexsort((events["seq"].to_numpy(), events["subproc"].to_numpy(), events["proc"].to_numpy(),
                       events["cluster"].to_numpy()))


def decisions(events: pd.DataFrame, nonzero_exit_is_failure: bool = False) -> pd.DataFrame:
    """One row per 012 event, in log order: the job, the hold, its earlier holds, and its label.

    Columns: cluster, proc, subproc, hold_seq, hold_time, hold_code, hold_subcode, hold_reason, hold_index
    (holds of the job before this one), reheld, label, resolution_code, resolution_time, resolution_seq (the
    terminal event's seq: what a later hold may know of this one's end)."""
    order = job_order(events)
    ev = events.iloc[order]
    code = ev["event_code"].to_numpy(dtype=np.int64)
    ids = ev[JOB].to_numpy(dtype=np.int64)
    new_job = np.r_[True, (ids[1:] != ids[:-1]).any(axis=1)]
    job = np.cumsum(new_job) - 1
    n = len(ev)
    terminal = (code == JOB_TERMINATED) | (code == JOB_ABORTED)
    position = np.arange(n)
    # the next terminal event at or after each position, and the next hold strictly after it
    next_terminal = np.minimum.accumulate(np.where(terminal, position, n)[::-1])[::-1]
    held = code == JOB_HELD
    next_hold = np.r_[np.minimum.accumulate(np.where(held, position, n)[::-1])[::-1][1:], n]
    rows = np.flatnonzero(held)
    end = next_terminal[rows]
    resolved = (end < n) & (job[np.minimum(end, n - 1)] == job[rows])
    end = np.where(resolved, end, 0)
    normal = ev["terminated_normally"].astype("boolean").fillna(False).to_numpy(dtype=bool)[end]
    returned = ev["return_value"].astype("Int64").fillna(-1).to_numpy(dtype=np.int64)[end]
    end_code = code[end]
    is_release = (end_code == JOB_TERMINATED) & normal
    if nonzero_exit_is_failure:
        is_release &= returned == 0
    label = np.where(resolved, np.where(is_release, "release", "remove"), None)
    hold_number = np.cumsum(held) - 1  # running count of holds, to count the earlier holds of each job
    first_of_job = np.maximum.accumulate(np.where(new_job, position, 0))
    earlier = hold_number[rows] - (np.cumsum(held)[first_of_job[rows]] - held[first_of_job[rows]])
    reheld = (next_hold[rows] < np.where(resolved, end, n)) & (job[np.minimum(next_hold[rows], n - 1)] == job[rows])
    reasons = ev["reason"].to_numpy(dtype=object)[rows]
    out = pd.DataFrame({
        "cluster": ids[rows, 0], "proc": ids[rows, 1], "subproc": ids[rows, 2],
        "hold_seq": ev["seq"].to_numpy(dtype=np.int64)[rows],
        "hold_time": ev["time"].to_numpy()[rows],
        "hold_code": pd.array(ev["code"].to_numpy(dtype=object)[rows], dtype="Int64"),
        "hold_subcode": pd.array(ev["subcode"].to_numpy(dtype=object)[rows], dtype="Int64"),
        "hold_reason": pd.array([None if r is pd.NA else r for r in reasons], dtype="string"),
        "hold_index": earlier.astype(np.int64),
        "reheld": reheld & (next_hold[rows] < n),
        "label": pd.array(label, dtype="string"),
        "resolution_code": pd.array(np.where(resolved, end_code, 0), dtype="Int64"),
        "resolution_time": pd.Series(ev["time"].to_numpy()[end]).where(resolved).to_numpy(),
        "resolution_seq": pd.array(np.where(resolved, ev["seq"].to_numpy(dtype=np.int64)[end], 0), dtype="Int64"),
    })
    out.loc[~resolved, ["resolution_code", "resolution_seq"]] = pd.NA
    return out.sort_values("hold_seq", kind="stable").reset_index(drop=True)


def label_records(table: pd.DataFrame, include_unresolved: bool = False) -> list[dict]:
    """Decision instances as the plain records `jobaware hold label --json` prints, in log order."""
    rows = table if include_unresolved else table[table["label"].notna()]
    return [
        {
            "cluster": int(r.cluster),
            "proc": int(r.proc),
            "hold_time": pd.Timestamp(r.hold_time).isoformat(sep=" "),
            "hold_code": None if pd.isna(r.hold_code) else int(r.hold_code),
            "hold_subcode": None if pd.isna(r.hold_subcode) else int(r.hold_subcode),
            "label": None if pd.isna(r.label) else str(r.label),
        }
        for r in rows.itertuples()
    ]


def describe_hold(code, subcode) -> str:
    """The hold reason code in words (for people and the service)."""
    return hold_reason_words(None if pd.isna(code) else int(code), None if pd.isna(subcode) else int(subcode))
