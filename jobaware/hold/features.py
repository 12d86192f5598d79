"""What a decision may know at its hold: e x m x j event-state tensors, static features and count features.

Causality. Only events written before the hold (log order: `seq` below the hold's) enter anything here;
an event's time is taken as the latest time its job has shown so far (a running maximum, so an event logged
late with an earlier stamp does not travel back). A test rebuilds every feature from the log cut right
after each hold and requires the same numbers.

The tensor of a decision: m frames of `timeframe_len` seconds ending at the hold time, oldest first; frame i
covers (T - (m-i)L, T - (m-1-i)L]. For each of j jobs, the frame holds the state of the job at the frame's
end: the code of its last event by then (carried forward; the hold itself included for the held job; the
informational 028 job-ad and 033 attribute-update events keep the state they found), one-hot over the
e = 49 event states (codes 0-47 and a 49th for newer codes); before the job's first event, zeros. Stored compactly as the state index
(uint8: 0 = no event yet, c + 1 for code c), shape (n, m, j); `one_hot` gives the (n, e, m, j) view.

The jobs of a tensor: the held job first, then up to j - 1 jobs that co-existed with it, chosen by this rule:
the jobs with an event before the hold, most recently active first (the time of their last event before the
hold); jobs whose last event then is a termination or removal before the window's start (T - mL) are gone
and left out. Jobs whose last events fall in the same second are ordered by a seeded hash of their job id
(log order within a second is the writers' interleaving, not meaning). Fewer than j - 1 such jobs leave zero
columns.

Static features: hold code, hold subcode and the job's earlier hold count. Count features (for the tree
baseline): the held job's history (executions, evictions, image-size updates, transfers, disconnects,
releases, remote errors, earlier holds, age, time since its last event, last event code), its siblings'
(the other jobs of its cluster, before the hold: holds, releases, removals, terminations), the pool's
last hour (events, holds, holds with the same code, from the same cluster and from other clusters,
releases, terminations, removals), and how the log's earlier holds ended (`EVIDENCE`): the holds of other
jobs whose end (jobaware.hold.labels: the job's next terminal event) the log wrote before this hold, counted
as ended `release` or `remove`, and those released (their next action a 013) whose end is not yet written
(`released_pending`: a release ends later than a removal, so ended holds alone lean towards removals early in a
log); over the whole log, of the same hold code, and of the cluster's other jobs; and the log's released holds
that then ended `remove` (with the ended `release` ones: how released holds end in this log).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.hold.events import N_EVENT_CODES
from jobaware.hold.labels import decisions
from jobaware.hold.reader import mix64

N_STATES = N_EVENT_CODES + 2  # index 0: no event yet; 1..48: codes 0..47; 49: a newer code
E = N_STATES - 1  # channels of the one-hot view
POOL_WINDOW = 3600
SHIFT = np.int64(1 << 40)
TERMINAL = (5, 9)
INFORMATIONAL = (28, 33)  # job-ad information and attribute updates: they repeat another event's moment
STATIC = ("hold_code", "hold_subcode", "hold_index")
HISTORY = {"n_execute": (1,), "n_evicted": (4,), "n_image_size": (6,), "n_transfer": (40,), "n_disconnect": (22,),
           "n_released": (13,), "n_remote_error": (21,), "n_held_before": (12,)}
SIBLINGS = ("sib_held", "sib_released", "sib_removed", "sib_terminated")
POOL = ("pool_events", "pool_held", "pool_held_same_code", "pool_held_same_code_cluster",
        "pool_held_same_code_other", "pool_released", "pool_terminated", "pool_aborted")
EVIDENCE = ("log_ended_release", "log_ended_remove", "log_released_pending", "log_ended_release_same_code",
            "log_ended_remove_same_code", "log_released_pending_same_code", "sib_ended_release", "sib_ended_remove",
            "sib_released_pending", "log_released_ended_remove")
NEXT_ACTION = (5, 9, 13)  # after a hold, the job's next of these says what became of it
NEVER = np.iinfo(np.int64).max // 4  # the seq of what has not happened
COUNT_FEATURES = (*STATIC, *HISTORY, "age", "since_last", "last_code", *SIBLINGS, *POOL, *EVIDENCE)


@dataclass
class EventIndex:
    """The events, compacted for building features: seq order, and by job then seq."""

    t0: int  # seconds since the epoch of the earliest event
    seq: np.ndarray  # seq order: the event's seq
    job: np.ndarray  # seq order: job index
    time: np.ndarray  # seq order: seconds since t0, the job's running maximum
    clock: np.ndarray  # seq order: running maximum over all events (for window starts)
    code: np.ndarray  # seq order: event code
    hold_code: np.ndarray  # seq order: the `code` column (hold reason code of 012 events), -1 where none
    by_job: np.ndarray  # positions (in seq order) sorted by job then seq
    key_time: np.ndarray  # by job: job << 40 | time
    key_seq: np.ndarray  # by job: job << 40 | seq
    job_first: np.ndarray  # per job: first row in by-job order
    job_ids: np.ndarray  # per job: cluster, proc, subproc
    job_hash: np.ndarray  # per job: hash of its id (tie-breaks, independent of indexing)
    holds: pd.DataFrame  # every hold and what became of it (`_hold_outcomes`), for EVIDENCE

    @property
    def state_by_job(self) -> np.ndarray:
        """By job: the job's state after each event (informational events keep the state before them)."""
        if getattr(self, "_state", None) is None:
            code = self.code[self.by_job]
            rows = np.arange(len(code))
            group_start = np.zeros(len(code), np.int64)
            group_start[self.job_first] = self.job_first
            group_start = np.maximum.accumulate(group_start)
            source = np.maximum.accumulate(np.where(np.isin(code, INFORMATIONAL), -1, rows))
            inherited = source >= group_start
            self._state = np.where(inherited, state_of(code)[np.maximum(source, 0)], 0).astype(np.uint8)
        return self._state


def state_of(code: np.ndarray) -> np.ndarray:
    """The state index of event codes: c + 1 for codes 0..47, 49 for newer ones."""
    code = np.asarray(code, np.int64)
    return np.where((code >= 0) & (code < N_EVENT_CODES), code + 1, N_STATES - 1).astype(np.uint8)


def build_index(events: pd.DataFrame) -> EventIndex:
    """Index a canonical events table (any row order) for tensor and feature building."""
    if not events["seq"].is_monotonic_increasing:
        events = events.sort_values("seq", kind="stable")
    seq = events["seq"].to_numpy(np.int64)
    cluster, proc, subproc = (events[c].to_numpy(np.int64) for c in ("cluster", "proc", "subproc"))
    by_id = np.lexsort((subproc, proc, cluster))
    new_id = np.ones(len(by_id), bool)
    new_id[1:] = (np.diff(cluster[by_id]) != 0) | (np.diff(proc[by_id]) != 0) | (np.diff(subproc[by_id]) != 0)
    job = np.empty(len(seq), np.int64)
    job[by_id] = np.cumsum(new_id) - 1
    first_of_id = by_id[new_id]
    job_ids = np.column_stack([cluster[first_of_id], proc[first_of_id], subproc[first_of_id]])
    del by_id, new_id, first_of_id
    seconds = events["time"].to_numpy("datetime64[s]").astype(np.int64)
    t0 = int(seconds.min()) if len(seconds) else 0
    seconds = seconds - t0
    by_job = np.lexsort((seq, job))
    # running maximum of time within each job, in log order
    job_sorted_time = seconds[by_job]
    starts = np.ones(len(by_job), bool)
    starts[1:] = job[by_job][1:] != job[by_job][:-1]
    group = np.cumsum(starts) - 1
    offset = group.astype(np.int64) * SHIFT
    running = np.maximum.accumulate(job_sorted_time + offset) - offset
    time = np.empty_like(seconds)
    time[by_job] = running
    job_first = np.flatnonzero(starts)
    job_hash = mix64([job_ids[:, 0], job_ids[:, 1], job_ids[:, 2]])
    return EventIndex(
        t0=t0, seq=seq, job=job, time=time, clock=np.maximum.accumulate(seconds) if len(seconds) else seconds,
        code=events["event_code"].to_numpy(np.int64),
        hold_code=events["code"].astype("Int64").fillna(-1).to_numpy(np.int64), by_job=by_job,
        key_time=job[by_job] * SHIFT + running, key_seq=job[by_job] * SHIFT + seq[by_job],
        job_first=job_first, job_ids=job_ids, job_hash=job_hash, holds=_hold_outcomes(events, seq, job))


def _hold_outcomes(events: pd.DataFrame, seq: np.ndarray, job: np.ndarray) -> pd.DataFrame:
    """Every hold of `events` and what became of it: `end_seq`, the seq of its end by the label rule (NEVER when
    it has none), whether that end is `release`, `released_seq`, the seq of the release (013) that was its next
    action (NEVER when its next action was none or another), the hold code (-1 where none), the job index and
    the cluster."""
    columns = ("end_seq", "release", "released_seq", "code", "job", "cluster")
    if not len(events) or not (events["event_code"] == 12).any():
        return pd.DataFrame({c: np.zeros(0, bool if c == "release" else np.int64) for c in columns})
    table = decisions(events)
    position = np.searchsorted(seq, table["hold_seq"].to_numpy(np.int64))
    hold_job = job[position]
    acts = np.flatnonzero(np.isin(events["event_code"].to_numpy(), NEXT_ACTION))
    order = np.lexsort((seq[acts], job[acts]))
    act_key = job[acts][order] * SHIFT + seq[acts][order]
    after = np.searchsorted(act_key, hold_job * SHIFT + table["hold_seq"].to_numpy(np.int64), side="right")
    found = after < len(act_key)
    found[found] &= act_key[after[found]] // SHIFT == hold_job[found]
    first = acts[order][np.minimum(after, len(acts) - 1)] if len(acts) else np.zeros(len(table), np.int64)
    released = found & (events["event_code"].to_numpy()[first] == 13)
    ended = table["label"].notna().to_numpy()
    return pd.DataFrame({"end_seq": np.where(ended, table["resolution_seq"].fillna(0).to_numpy(np.int64), NEVER),
                         "release": (table["label"] == "release").fillna(False).to_numpy(bool),
                         "released_seq": np.where(released, seq[first], NEVER),
                         "code": table["hold_code"].fillna(-1).to_numpy(np.int64), "job": hold_job,
                         "cluster": table["cluster"].to_numpy(np.int64)})


@dataclass
class Holds:
    """The decisions as positions in an index."""

    position: np.ndarray  # seq-order position of the hold event
    seq: np.ndarray
    job: np.ndarray
    time: np.ndarray  # seconds since t0 (the hold event's own time)


def locate(index: EventIndex, table: pd.DataFrame) -> Holds:
    """Find each decision's hold event (`hold_seq`) in the index."""
    seq = table["hold_seq"].to_numpy(np.int64)
    position = np.searchsorted(index.seq, seq)
    if len(seq) and (position.max() >= len(index.seq) or (index.seq[position] != seq).any()):
        raise ValueError("a decision's hold_seq is not in the events")
    return Holds(position, seq, index.job[position], index.time[position])


def _last_before(index: EventIndex, jobs: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """By-job row of each job's last event with seq below `seq` (-1 when it has none)."""
    row = np.searchsorted(index.key_seq, jobs * SHIFT + seq, side="left") - 1
    ok = (jobs >= 0) & (row >= 0)
    ok &= row >= index.job_first[np.clip(jobs, 0, len(index.job_first) - 1)]
    return np.where(ok, row, -1)


def co_jobs(index: EventIndex, holds: Holds, j: int, window: int, seed: int) -> np.ndarray:
    """The (n, j) job indices of each decision: the held job, then co-existing jobs by the module's rule (-1: none)."""
    n = len(holds.position)
    chosen = np.full((n, j), -1, np.int64)
    chosen[:, 0] = holds.job
    if j == 1 or n == 0:
        return chosen
    need = j - 1
    salt = mix64([np.array([seed], np.int64)])[0]
    todo = np.arange(n)
    look = max(4 * j, 64)
    while len(todo):
        position = holds.position[todo]
        offsets = np.arange(1, look + 1)
        at = position[:, None] - offsets[None, :]  # most recent first
        valid = at >= 0
        at = np.maximum(at, 0)
        job = np.where(valid, index.job[at], -1)
        valid &= job != holds.job[todo][:, None]
        row = np.broadcast_to(np.arange(len(todo))[:, None], at.shape)
        flat = np.flatnonzero(valid.ravel())
        key = row.ravel()[flat] * len(index.job_ids) + job.ravel()[flat]
        _, first = np.unique(key, return_index=True)  # first = most recent occurrence (the row-major walk)
        pick = flat[first]
        r, k = np.unravel_index(pick, at.shape)
        candidate_job = job[r, k]
        last_time = index.time[at[r, k]]
        gone = np.isin(index.code[at[r, k]], TERMINAL) & (last_time < holds.time[todo][r] - window)
        r, candidate_job, last_time = r[~gone], candidate_job[~gone], last_time[~gone]
        tie = index.job_hash[candidate_job] ^ salt
        order = np.lexsort((tie, -last_time, r))
        r, candidate_job, last_time = r[order], candidate_job[order], last_time[order]
        group_start = np.r_[0, np.flatnonzero(np.diff(r)) + 1]
        rank = np.arange(len(r)) - np.repeat(group_start, np.diff(np.r_[group_start, len(r)]))
        count = np.bincount(r, minlength=len(todo))
        # complete when enough were found and the last one taken is newer than the window's oldest event,
        # or when the window reached the start of the log
        oldest = index.clock[at[:, -1]]  # no job unseen in the window has a later last event
        reached_start = position - look < 0
        kth_time = np.full(len(todo), np.iinfo(np.int64).max)
        taken = rank == need - 1
        kth_time[r[taken]] = last_time[taken]
        complete = reached_start | ((count >= need) & (kth_time > oldest))
        keep = (rank < need) & complete[r]
        chosen[todo[r[keep]], 1 + rank[keep]] = candidate_job[keep]
        todo = todo[~complete]
        look *= 4
    return chosen


def frame_states(index: EventIndex, holds: Holds, jobs: np.ndarray, m: int, timeframe_len: int) -> np.ndarray:
    """(n, m, j) state indices: each job's state at each frame's end, from events before the hold."""
    n, j = jobs.shape
    last_seq = _last_before(index, jobs.ravel(), np.repeat(holds.seq + 1, j)).reshape(n, j)  # the hold included
    ends = holds.time[:, None] - timeframe_len * np.arange(m - 1, -1, -1)[None, :]  # (n, m), oldest first
    query = jobs[:, None, :] * SHIFT + ends[:, :, None]  # (n, m, j)
    row = np.searchsorted(index.key_time, query.ravel(), side="right").reshape(n, m, j) - 1
    row = np.minimum(row, last_seq[:, None, :])
    first = index.job_first[np.clip(jobs, 0, len(index.job_first) - 1)][:, None, :]
    known = (jobs[:, None, :] >= 0) & (row >= first) & (ends[:, :, None] >= 0)
    return np.where(known, index.state_by_job[np.maximum(row, 0)], 0).astype(np.uint8)


def build_tensors(index: EventIndex, table: pd.DataFrame, m: int, j: int, timeframe_len: int, seed: int,
                  out: Path | None = None, chunk: int = 256,
                  progress: Callable[[int], None] | None = None) -> np.ndarray:
    """The (n, m, j) uint8 state tensors of the decisions in `table`, built in chunks (bounded memory).

    With `out`, the chunks are written one after another to a .npy file, returned memory-mapped read-only:
    the process holds one chunk, whatever n."""
    holds = locate(index, table)
    n = len(holds.position)
    step = max(1, min(chunk, 4_000_000 // max(m * j, 1)))

    def chunks():
        for begin in range(0, n, step):
            part = Holds(*(a[begin:begin + step] for a in (holds.position, holds.seq, holds.job, holds.time)))
            yield frame_states(index, part, co_jobs(index, part, j, m * timeframe_len, seed), m, timeframe_len)
            if progress:
                progress(len(part.position))

    if out is None:
        return np.concatenate(list(chunks())) if n else np.zeros((0, m, j), np.uint8)
    with open(out, "wb") as handle:
        np.lib.format.write_array_header_1_0(handle, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.uint8)),
                                                     "fortran_order": False, "shape": (n, m, j)})
        for states in chunks():
            handle.write(np.ascontiguousarray(states).tobytes())
    return np.load(out, mmap_mode="r")


def one_hot(states: np.ndarray) -> np.ndarray:
    """The (n, e, m, j) one-hot view of (n, m, j) state indices (zeros where no event yet)."""
    eye = np.vstack([np.zeros((1, E), np.float32), np.eye(E, dtype=np.float32)])
    return np.moveaxis(eye[states], -1, 1)


def static_features(table: pd.DataFrame) -> pd.DataFrame:
    """Hold code, subcode (-1 where the log gave none) and the job's earlier hold count."""
    return pd.DataFrame({
        "hold_code": table["hold_code"].astype("Int64").fillna(-1).to_numpy(np.int64),
        "hold_subcode": table["hold_subcode"].astype("Int64").fillna(-1).to_numpy(np.int64),
        "hold_index": table["hold_index"].to_numpy(np.int64),
    })


def count_features(index: EventIndex, table: pd.DataFrame) -> pd.DataFrame:
    """The held job's history and the pool's last hour, from events before each hold (tree baseline)."""
    holds = locate(index, table)
    out = static_features(table)
    last = _last_before(index, holds.job, holds.seq)
    first = index.job_first[holds.job]
    code_by_job = index.code[index.by_job]
    for name, codes in HISTORY.items():
        hit = np.r_[0, np.cumsum(np.isin(code_by_job, codes))]
        out[name] = np.where(last >= 0, hit[last + 1] - hit[first], 0)
    time_by_job = index.time[index.by_job]
    out["age"] = np.where(last >= 0, holds.time - time_by_job[first], 0)
    out["since_last"] = np.where(last >= 0, holds.time - time_by_job[np.maximum(last, 0)], 0)
    out["last_code"] = np.where(last >= 0, code_by_job[np.maximum(last, 0)], -1)
    start = np.searchsorted(index.clock, holds.time - POOL_WINDOW, side="left")
    position = holds.position
    cluster = index.job_ids[index.job, 0]
    for name, code, own in (("sib_held", 12, "n_held_before"), ("sib_released", 13, "n_released"),
                            ("sib_removed", 9, None), ("sib_terminated", 5, None)):
        rows = np.flatnonzero(index.code == code)
        before = _count_keyed(cluster[rows], rows, cluster[position], np.zeros_like(position), position)
        out[name] = before - (out[own].to_numpy() if own else 0)

    def in_window(mask: np.ndarray) -> np.ndarray:
        cum = np.r_[0, np.cumsum(mask)]
        return cum[position] - cum[np.minimum(start, position)]

    out["pool_events"] = position - np.minimum(start, position)
    held = index.code == 12
    out["pool_held"] = in_window(held)
    out["pool_released"] = in_window(index.code == 13)
    out["pool_terminated"] = in_window(index.code == 5)
    out["pool_aborted"] = in_window(index.code == 9)
    hold_rows = np.flatnonzero(held)
    same_code = _count_keyed(index.hold_code[hold_rows], hold_rows, index.hold_code[position], start, position)
    pair = index.hold_code * (1 << 40) + cluster
    same_cluster = _count_keyed(pair[hold_rows], hold_rows, pair[position], start, position)
    out["pool_held_same_code"] = same_code
    out["pool_held_same_code_cluster"] = same_cluster
    out["pool_held_same_code_other"] = same_code - same_cluster
    for name, value in evidence(index, holds, index.hold_code[position], cluster[position]).items():
        out[name] = value
    return out[list(COUNT_FEATURES)]


def evidence(index: EventIndex, holds: Holds, code: np.ndarray, cluster: np.ndarray) -> dict[str, np.ndarray]:
    """EVIDENCE of each hold: the other jobs' holds whose end, or whose release not yet ended, the log wrote
    before it."""
    seen = index.holds
    zero = np.zeros(len(holds.seq), np.int64)

    def count(mask: np.ndarray, at: str) -> dict[str, np.ndarray]:
        """Holds of other jobs among `mask` whose `at` comes before each hold: in the log, of its code, its
        cluster's."""
        part = seen[mask]
        rows, jobs, codes = part[at].to_numpy(np.int64), part["job"].to_numpy(), part["code"].to_numpy()
        own = _count_keyed(jobs, rows, holds.job, zero, holds.seq)
        own_code = _count_keyed(jobs * SHIFT + codes, rows, holds.job * SHIFT + code, zero, holds.seq)
        return {"log": np.searchsorted(np.sort(rows), holds.seq) - own,
                "code": _count_keyed(codes, rows, code, zero, holds.seq) - own_code,
                "sib": _count_keyed(part["cluster"].to_numpy(), rows, cluster, zero, holds.seq) - own}

    ended = seen["end_seq"].to_numpy() != NEVER
    released = seen["released_seq"].to_numpy() != NEVER
    release, remove = count(ended & seen["release"].to_numpy(), "end_seq"), count(ended & ~seen["release"].to_numpy(),
                                                                                 "end_seq")
    release_seen, release_ended = count(released, "released_seq"), count(released & ended, "end_seq")
    out = {}
    for level, prefix in (("log", "log_"), ("code", "log_"), ("sib", "sib_")):
        suffix = "_same_code" if level == "code" else ""
        out[f"{prefix}ended_release{suffix}"] = release[level]
        out[f"{prefix}ended_remove{suffix}"] = remove[level]
        out[f"{prefix}released_pending{suffix}"] = release_seen[level] - release_ended[level]
    out["log_released_ended_remove"] = count(released & ended & ~seen["release"].to_numpy(), "end_seq")["log"]
    return {name: out[name] for name in EVIDENCE}


def _count_keyed(keys: np.ndarray, rows: np.ndarray, query: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """For each query: how many items have key == query and start <= row < stop (vectorised)."""
    unique, rank = np.unique(keys, return_inverse=True)
    composite = np.sort(rank.ravel().astype(np.int64) * SHIFT + rows)
    where = np.searchsorted(unique, query).clip(max=max(len(unique) - 1, 0))
    present = (len(unique) > 0) & (unique[where] == query) if len(unique) else np.zeros(len(query), bool)
    base = where.astype(np.int64) * SHIFT
    count = np.searchsorted(composite, base + stop) - np.searchsorted(composite, base + start)
    return np.where(present, count, 0)
