"""What is known of a job when it is submitted: its request, the state of the queue at that moment, and the waits of
earlier jobs that had started by then.

The queue state is rebuilt from the jobs themselves by one sweep over their events in time order (`sweep`): a job
is pending from its submit to its start and running from its start to its end; a job with an end but no start left
the queue at its end without running (cancelled while pending; or still pending when a job store was read, its end
that moment: `jobaware.wait.export`); a job with neither never waits in the queue. At a job's submit time `t` the
sweep knows every start and end strictly before `t` and every submission before the job's own (earlier in time, or
in the same second and of a lower job id); nothing later. From that state one compiled function
(`_snapshot_row`) computes the job's features; the service calls the same function on a queue snapshot taken from
the scheduler (`snapshot_features`), so training and serving share the feature code.

A job's wait enters history at its start (never before), folded into exponentially weighted means of log waits per
user, group, queue, processor bucket and the whole system (`History`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np
import pandas as pd

# the target, and every wait a feature holds, in log seconds shifted by a minute: waits under a minute differ little
SHIFT = 60.0
# pending jobs ahead that the first-come-first-served simulation plays (the rest only count in the sums)
AHEAD = 256
UNKNOWN_REQ = 3600.0  # the requested time a simulation takes for a job that states none
FAST, SLOW = 0.3, 0.05  # weights of the newest wait in the fast and slow means
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0  # the windows of recent starts

REQUEST = ("log2_procs", "log_req", "log_area", "req_known", "procs_share", "hour", "weekday")
STATE = ("pend_n", "pend_procs", "pend_area", "pend_age_max", "pend_age_mean", "queue_pend_n", "queue_pend_area",
         "user_pend_n", "user_pend_procs", "run_n", "busy", "free", "fits_now", "queue_busy", "user_run_n",
         "user_run_procs", "run_left_area", "until_fit", "until_fcfs", "head_shadow", "head_extra", "backfills_now",
         "until_easy", "run_young", "next_end", "ends_hour", "run_age_min")
HISTORY = ("user_fast", "user_slow", "user_n", "user_last", "group_fast", "group_n", "queue_fast", "queue_n",
           "bucket_fast", "all_fast", "all_slow")
RECENT = ("recent_hour", "recent_hour_n", "recent_day", "recent_day_quick")
NUMERIC = REQUEST + STATE + HISTORY + RECENT
CATEGORICAL = ("queue",)
FEATURES = NUMERIC + CATEGORICAL
ENTITIES = ("user", "group", "queue", "bucket", "all")


def log_wait(seconds):
    return np.log(np.maximum(seconds, 0.0) + SHIFT)


def from_log_wait(z):
    return np.maximum(np.exp(z) - SHIFT, 0.0)


def bucket(procs: np.ndarray) -> np.ndarray:
    """Processor buckets: 1, 2, 3-4, 5-8, ... (the power of two at or above)."""
    return np.ceil(np.log2(np.maximum(np.nan_to_num(procs, nan=1.0), 1.0))).astype(np.int64)


# ---------------------------------------------------------------- the queue state at one moment
@numba.njit(cache=True)
def _until_free(t, free, need, ends, procs, count):
    """Seconds from `t` until `need` processors are free, running jobs ending at `ends` (sorted) giving back
    `procs`; a need above all the machine's is met when everything has ended."""
    have = free
    if have >= need:
        return 0.0
    for k in range(count):
        have += procs[k]
        if have >= need:
            return max(ends[k] - t, 0.0)
    return max(ends[count - 1] - t, 0.0) if count > 0 else 0.0


@numba.njit(cache=True)
def _heap_push(keys, values, size, key, value):
    i = size
    keys[i], values[i] = key, value
    while i > 0:
        parent = (i - 1) // 2
        if keys[parent] <= keys[i]:
            break
        keys[parent], keys[i] = keys[i], keys[parent]
        values[parent], values[i] = values[i], values[parent]
        i = parent
    return size + 1


@numba.njit(cache=True)
def _heap_pop(keys, values, size):
    key, value = keys[0], values[0]
    size -= 1
    keys[0], values[0] = keys[size], values[size]
    i = 0
    while True:
        left, smallest = 2 * i + 1, i
        if left < size and keys[left] < keys[smallest]:
            smallest = left
        if left + 1 < size and keys[left + 1] < keys[smallest]:
            smallest = left + 1
        if smallest == i:
            break
        keys[smallest], keys[i] = keys[i], keys[smallest]
        values[smallest], values[i] = values[i], values[smallest]
        i = smallest
    return key, value, size


@numba.njit(cache=True)
def _fcfs_start(t, capacity, busy, run_end, run_procs, n_run, pend_procs, pend_req, n_ahead, procs, keys, values):
    """Seconds from `t` until the job starts if the pending jobs ahead start first in order, each as soon as enough
    processors are free, and every job runs for its requested time."""
    size = 0
    for k in range(n_run):
        size = _heap_push(keys, values, size, run_end[k], run_procs[k])
    free = capacity - busy
    now = t
    for k in range(n_ahead + 1):
        need = min(procs if k == n_ahead else pend_procs[k], capacity)
        while free < need and size > 0:
            end, back, size = _heap_pop(keys, values, size)
            now = max(now, end)
            free += back
        if k == n_ahead:
            break
        size = _heap_push(keys, values, size, now + pend_req[k], need)
        free -= need
    return now - t


@numba.njit(cache=True)
def _insert_sorted(ends, procs, count, end, need):
    """Put a running job (its end, its processors) into the first `count` entries of `ends`, kept sorted."""
    i = count
    while i > 0 and ends[i - 1] > end:
        ends[i], procs[i] = ends[i - 1], procs[i - 1]
        i -= 1
    ends[i], procs[i] = end, need
    return count + 1


@numba.njit(cache=True)
def _easy_start(t, capacity, free, sorted_end, sorted_procs, n_run, pend_procs, pend_req, n_ahead, procs, req):
    """Seconds from `t` until the job starts under EASY backfilling if no other job comes: the pending jobs ahead
    in order, then the job, every job running for its requested time. At each moment the scheduler starts jobs from
    the head of the queue while they fit, reserves the first that does not fit at the earliest time enough
    processors are free (its shadow), and starts any later job that fits now and either ends by the shadow or
    leaves the head its processors (Lifka 1995; Mu'alem and Feitelson 2001)."""
    size = n_run + n_ahead + 1
    ends = np.empty(size)
    back = np.empty(size)
    for k in range(n_run):
        ends[k], back[k] = sorted_end[k], sorted_procs[k]
    count = n_run
    first = 0  # running jobs before `first` have ended
    waiting = np.ones(n_ahead + 1, np.bool_)
    head = 0
    now = t
    while True:
        # first come, first served while the head fits
        while head <= n_ahead:
            need = min(procs if head == n_ahead else pend_procs[head], capacity)
            if need > free:
                break
            if head == n_ahead:
                return now - t
            count = _insert_sorted(ends, back, count, now + pend_req[head], need)
            free -= need
            waiting[head] = False
            head += 1
            while head <= n_ahead and not waiting[head]:
                head += 1
        # the head's reservation: when enough processors are free, and what is left over then
        head_need = min(procs if head == n_ahead else pend_procs[head], capacity)
        have = free
        shadow = now
        k = first
        while k < count and have < head_need:
            have += back[k]
            shadow = ends[k]
            k += 1
        while k < count and ends[k] <= shadow:
            have += back[k]
            k += 1
        extra = have - head_need
        for j in range(head + 1, n_ahead + 1):
            if not waiting[j]:
                continue
            need = min(procs if j == n_ahead else pend_procs[j], capacity)
            length = req if j == n_ahead else pend_req[j]
            if need <= free and (now + length <= shadow or need <= extra):
                if j == n_ahead:
                    return now - t
                waiting[j] = False
                count = _insert_sorted(ends, back, count, now + length, need)
                free -= need
                if now + length > shadow:
                    extra -= need
        # on to the next end
        if first >= count:
            return now - t  # nothing runs and the head does not fit: cannot happen with needs capped at capacity
        now = max(now, ends[first])
        while first < count and ends[first] <= now:
            free += back[first]
            first += 1


@numba.njit(cache=True)
def _snapshot_row(t, capacity, procs, req, queue, user,
                  run_start, run_req, run_procs, run_queue, run_user, n_run,
                  pend_submit, pend_req, pend_procs, pend_queue, pend_user, n_pend,
                  scratch_end, scratch_procs, keys, values, out):
    """The STATE features of a job asking for `procs` x `req` in `queue` at time `t`, given the running jobs (their
    start, requested time, processors, queue, user) and the pending ones in the order they are served."""
    cap = max(capacity, 1.0)
    pend_n = 0.0
    pend_procs_sum = 0.0
    pend_area = 0.0
    age_max = 0.0
    age_sum = 0.0
    queue_n = 0.0
    queue_area = 0.0
    user_n = 0.0
    user_procs = 0.0
    for k in range(n_pend):
        area = pend_procs[k] * pend_req[k]
        pend_n += 1.0
        pend_procs_sum += pend_procs[k]
        pend_area += area
        age = t - pend_submit[k]
        age_max = max(age_max, age)
        age_sum += age
        if pend_queue[k] == queue:
            queue_n += 1.0
            queue_area += area
        if pend_user[k] == user:
            user_n += 1.0
            user_procs += pend_procs[k]
    busy = 0.0
    queue_busy = 0.0
    user_run = 0.0
    user_run_procs = 0.0
    left_area = 0.0
    young = 0.0
    ends_hour = 0.0
    age_min = np.inf
    for k in range(n_run):
        busy += run_procs[k]
        # a job past its requested time is taken to end within the next minute
        end = max(run_start[k] + run_req[k], t + 60.0)
        scratch_end[k] = end
        age = t - run_start[k]
        age_min = min(age_min, age)
        if age < 600.0:
            young += run_procs[k]
        if end - t <= 3600.0:
            ends_hour += run_procs[k]
        left_area += run_procs[k] * (end - t)
        if run_queue[k] == queue:
            queue_busy += run_procs[k]
        if run_user[k] == user:
            user_run += 1.0
            user_run_procs += run_procs[k]
    order = np.argsort(scratch_end[:n_run])
    sorted_end = scratch_end[:n_run][order]
    sorted_procs = run_procs[:n_run][order]
    for k in range(n_run):
        scratch_procs[k] = sorted_procs[k]
    free = max(cap - busy, 0.0)
    need = min(procs, cap)
    hours = 3600.0 * cap
    out[0] = pend_n
    out[1] = pend_procs_sum / cap
    out[2] = pend_area / hours
    out[3] = np.log(age_max + SHIFT) if pend_n > 0 else np.nan
    out[4] = np.log(age_sum / pend_n + SHIFT) if pend_n > 0 else np.nan
    out[5] = queue_n
    out[6] = queue_area / hours
    out[7] = user_n
    out[8] = user_procs / cap
    out[9] = float(n_run)
    out[10] = busy / cap
    out[11] = free / cap
    out[12] = 1.0 if free >= need and pend_n == 0 else (0.5 if free >= need else 0.0)
    out[13] = queue_busy / cap
    out[14] = user_run
    out[15] = user_run_procs / cap
    out[16] = left_area / hours
    out[17] = np.log(_until_free(t, free, need, sorted_end, scratch_procs, n_run) + SHIFT)
    ahead = min(n_pend, AHEAD)
    out[18] = np.log(_fcfs_start(t, cap, busy, sorted_end, scratch_procs, n_run, pend_procs, pend_req, ahead,
                                 need, keys, values) + SHIFT)
    # EASY backfilling's test for the first pending job's reservation: the job starts now if it fits now and ends
    # before that reservation or leaves it enough processors
    if n_pend > 0:
        head_need = min(pend_procs[0], cap)
        shadow = _until_free(t, free, head_need, sorted_end, scratch_procs, n_run)
        at_shadow = free
        for k in range(n_run):
            if sorted_end[k] - t <= shadow:
                at_shadow += scratch_procs[k]
        extra = max(at_shadow - head_need, 0.0)
        out[19] = np.log(shadow + SHIFT)
        out[20] = extra / cap
        out[21] = 1.0 if free >= need and (req <= shadow or need <= extra) else 0.0
    else:
        out[19] = np.log(SHIFT)
        out[20] = free / cap
        out[21] = 1.0 if free >= need else 0.0
    out[22] = np.log(_easy_start(t, cap, free, sorted_end, scratch_procs, n_run, pend_procs, pend_req, ahead, need,
                                 req) + SHIFT)
    out[23] = young / cap
    out[24] = np.log(sorted_end[0] - t + SHIFT) if n_run > 0 else np.nan
    out[25] = ends_hour / cap
    out[26] = np.log(max(age_min, 0.0) + SHIFT) if n_run > 0 else np.nan


# ---------------------------------------------------------------- the history of waits
@numba.njit(cache=True)
def _fold_wait(state, z):
    """One started job's log wait into an entity's state: fast mean, slow mean, count, last."""
    if state[2] == 0.0:
        state[0] = z
        state[1] = z
    else:
        state[0] += FAST * (z - state[0])
        state[1] += SLOW * (z - state[1])
    state[2] += 1.0
    state[3] = z


@numba.njit(cache=True)
def _history_row(user, group, queue, bucket_, all_, out):
    """The HISTORY features from the entities' states (NaN where an entity has no started job yet)."""
    nan = np.nan
    seen = user[2] > 0
    out[0] = user[0] if seen else nan
    out[1] = user[1] if seen else nan
    out[2] = np.log1p(user[2])
    out[3] = user[3] if seen else nan
    out[4] = group[0] if group[2] > 0 else nan
    out[5] = np.log1p(group[2])
    out[6] = queue[0] if queue[2] > 0 else nan
    out[7] = np.log1p(queue[2])
    out[8] = bucket_[0] if bucket_[2] > 0 else nan
    out[9] = all_[0] if all_[2] > 0 else nan
    out[10] = all_[1] if all_[2] > 0 else nan


@numba.njit(cache=True)
def _recent_row(t, times, z, count, out):
    """The RECENT features at `t` from the starts before it (`times` sorted, `z` their log waits, the first `count`
    of them): the mean log wait and the number of jobs started in the last hour; in the last day, the mean log wait
    and the share that started within a minute."""
    hour_n, hour_sum, day_n, day_sum, day_quick = 0.0, 0.0, 0.0, 0.0, 0.0
    quick = np.log(SHIFT + MINUTE)
    k = count - 1
    while k >= 0 and times[k] > t - DAY:
        day_n += 1.0
        day_sum += z[k]
        if z[k] < quick:
            day_quick += 1.0
        if times[k] > t - HOUR:
            hour_n += 1.0
            hour_sum += z[k]
        k -= 1
    out[0] = hour_sum / hour_n if hour_n > 0 else np.nan
    out[1] = np.log1p(hour_n)
    out[2] = day_sum / day_n if day_n > 0 else np.nan
    out[3] = day_quick / day_n if day_n > 0 else np.nan


# ---------------------------------------------------------------- the sweep over a whole trace
SUBMIT, END, START = 0, 1, 2  # at the same second a submission sees neither the starts nor the ends of that second


@numba.njit(cache=True)
def _unlink(j, pending, nxt, prv, head, tail):
    """Take job `j` out of the pending list; the list's new head and tail."""
    pending[j] = False
    if prv[j] != -1:
        nxt[prv[j]] = nxt[j]
    else:
        head = nxt[j]
    if nxt[j] != -1:
        prv[nxt[j]] = prv[j]
    else:
        tail = prv[j]
    return head, tail


@numba.njit(cache=True)
def _sweep(submit, start, end, procs, req, queue, user, group, bucket_, capacity,
           user_states, group_states, queue_states, bucket_states, all_state,
           ev_time, ev_kind, ev_job, state_out, history_out, recent_out, started_time, started_z):
    n = len(submit)
    n_state = state_out.shape[1]
    # pending jobs: a doubly linked list in submit order; running jobs: a dense list
    nxt = np.full(n, -1, np.int64)
    prv = np.full(n, -1, np.int64)
    head, tail = -1, -1
    pending = np.zeros(n, np.bool_)
    run_list = np.empty(n, np.int64)
    run_pos = np.full(n, -1, np.int64)
    n_run = 0
    n_pend = 0
    # scratch for one snapshot
    r_start = np.empty(n, np.float64)
    r_req = np.empty(n, np.float64)
    r_procs = np.empty(n, np.float64)
    r_queue = np.empty(n, np.int64)
    r_user = np.empty(n, np.int64)
    p_submit = np.empty(n, np.float64)
    p_req = np.empty(n, np.float64)
    p_procs = np.empty(n, np.float64)
    p_queue = np.empty(n, np.int64)
    p_user = np.empty(n, np.int64)
    s_end = np.empty(n, np.float64)
    s_procs = np.empty(n, np.float64)
    keys = np.empty(n + AHEAD + 2, np.float64)
    values = np.empty(n + AHEAD + 2, np.float64)
    row = np.empty(n_state, np.float64)
    hist = np.empty(history_out.shape[1], np.float64)
    recent = np.empty(recent_out.shape[1], np.float64)
    n_started = 0
    for e in range(len(ev_time)):
        j = ev_job[e]
        kind = ev_kind[e]
        t = ev_time[e]
        if kind == SUBMIT:
            for k in range(n_run):
                r = run_list[k]
                r_start[k] = start[r]
                r_req[k] = req[r]
                r_procs[k] = procs[r]
                r_queue[k] = queue[r]
                r_user[k] = user[r]
            k = 0
            p = head
            while p != -1:
                p_submit[k] = submit[p]
                p_req[k] = req[p]
                p_procs[k] = procs[p]
                p_queue[k] = queue[p]
                p_user[k] = user[p]
                k += 1
                p = nxt[p]
            _snapshot_row(t, capacity[j], procs[j], req[j], queue[j], user[j],
                          r_start, r_req, r_procs, r_queue, r_user, n_run,
                          p_submit, p_req, p_procs, p_queue, p_user, n_pend,
                          s_end, s_procs, keys, values, row)
            state_out[j, :] = row
            _history_row(user_states[user[j]], group_states[group[j]], queue_states[queue[j]],
                         bucket_states[bucket_[j]], all_state, hist)
            history_out[j, :] = hist
            _recent_row(t, started_time, started_z, n_started, recent)
            recent_out[j, :] = recent
            if start[j] >= 0 or end[j] >= 0:  # neither a start nor an end known: it never waits in the queue
                pending[j] = True
                prv[j] = tail
                if tail != -1:
                    nxt[tail] = j
                else:
                    head = j
                tail = j
                n_pend += 1
        elif kind == START:
            if pending[j]:
                head, tail = _unlink(j, pending, nxt, prv, head, tail)
                n_pend -= 1
            if end[j] > start[j]:
                run_pos[j] = n_run
                run_list[n_run] = j
                n_run += 1
            z = np.log(max(start[j] - submit[j], 0.0) + SHIFT)
            started_time[n_started] = t
            started_z[n_started] = z
            n_started += 1
            if user[j] > 0:  # code 0: not known, no entity
                _fold_wait(user_states[user[j]], z)
            if group[j] > 0:
                _fold_wait(group_states[group[j]], z)
            if queue[j] > 0:
                _fold_wait(queue_states[queue[j]], z)
            _fold_wait(bucket_states[bucket_[j]], z)
            _fold_wait(all_state, z)
        elif start[j] < 0:  # END of a job that left the queue without running
            if pending[j]:
                head, tail = _unlink(j, pending, nxt, prv, head, tail)
                n_pend -= 1
        else:  # END
            k = run_pos[j]
            if k >= 0:
                last = run_list[n_run - 1]
                run_list[k] = last
                run_pos[last] = k
                run_pos[j] = -1
                n_run -= 1


@dataclass
class Codes:
    """Strings to the integer codes the sweep uses (0: unknown), per entity; fixed by the training data."""

    maps: dict[str, dict[str, int]] = field(default_factory=dict)

    def encode(self, entity: str, values: pd.Series, grow: bool = True) -> np.ndarray:
        table = self.maps.setdefault(entity, {})
        found, uniques = pd.factorize(values)
        if grow:
            for value in uniques:
                table.setdefault(str(value), len(table) + 1)
        lookup = np.array([table.get(str(value), 0) for value in uniques] + [0], dtype=np.int64)
        return lookup[found]  # factorize's -1 (unknown) takes the last entry, 0


def _local(times: pd.Series, zones: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Hour of day and day of week of UTC times in each row's zone."""
    hour = np.zeros(len(times))
    weekday = np.zeros(len(times))
    for zone in pd.unique(zones.fillna("UTC")):
        rows = (zones.fillna("UTC") == zone).to_numpy()
        try:
            local = times[rows].dt.tz_convert(zone)
        except (KeyError, ValueError, TypeError):
            local = times[rows]
        hour[rows] = local.dt.hour + local.dt.minute / 60.0
        weekday[rows] = local.dt.weekday
    return hour, weekday


def request_features(jobs: pd.DataFrame, capacity: np.ndarray) -> pd.DataFrame:
    """The REQUEST features: what the job asks for and when."""
    procs = jobs["processors_req"].astype("float64").fillna(1.0).clip(lower=1.0).to_numpy()
    req = jobs["wallclock_req"].astype("float64").to_numpy()
    hour, weekday = _local(jobs["submit_time"], jobs["timezone"])
    return pd.DataFrame({
        "log2_procs": np.log2(procs),
        "log_req": np.log1p(req),
        "log_area": np.log1p(req * procs),
        "req_known": np.isfinite(req).astype(float),
        "procs_share": procs / np.maximum(capacity, 1.0),
        "hour": hour,
        "weekday": weekday,
    }, index=jobs.index)


def seconds(times: pd.Series) -> np.ndarray:
    """UTC timestamps as float seconds since the epoch (NaN: unknown)."""
    values = times.dt.tz_convert("UTC").dt.tz_localize(None).astype("datetime64[s]").astype("int64").astype("float64")
    return np.where(times.isna().to_numpy(), np.nan, values)


def entity(jobs: pd.DataFrame, name: str) -> pd.Series:
    """A user, group or queue as an entity of its cluster (`cluster/name`; unknown stays unknown)."""
    values = jobs[name].astype("string")
    return (jobs["cluster"].astype("string") + "/" + values).where(values.notna())


def job_keys(jobs: pd.DataFrame) -> np.ndarray:
    """Each job's key: a 64-bit hash of its `cluster/job_id`."""
    text = jobs["cluster"].astype(str) + "/" + jobs["job_id"].astype("int64").astype(str)
    return pd.util.hash_pandas_object(text, index=False).to_numpy(np.uint64)


def order(jobs: pd.DataFrame) -> pd.DataFrame:
    """Jobs in the order the sweep sees their submissions: cluster, submit time, then job id (jobs of the same second
    answered alike in any line order), then their place in the source."""
    return jobs.sort_values(["cluster", "submit_time", "job_id", "line"], kind="stable").reset_index(drop=True)


def capacities(jobs: pd.DataFrame) -> np.ndarray:
    """Each job's cluster size: the stated one, else the most processors asked or running at once so far (no later
    job changes it)."""
    procs = jobs["processors_req"].astype("float64").fillna(1.0).clip(lower=1.0)
    stated = jobs["cluster_procs"].astype("float64")
    seen = procs.groupby(jobs["cluster"]).cummax()
    return stated.fillna(seen).to_numpy()


@dataclass
class History:
    """The entities' wait histories after a sweep: codes and per-code states (fast, slow, count, last), the last
    start folded in (epoch seconds), and the starts of the day before it."""

    codes: Codes
    states: dict[str, np.ndarray]
    until: float = float("-inf")
    # the starts of the last day before `until` (epoch seconds, sorted) and their log waits: the RECENT windows
    recent_time: np.ndarray = field(default_factory=lambda: np.zeros(0))
    recent_z: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def state(self, name: str, code: int) -> np.ndarray:
        """A copy of one entity's state (all zeros: no started job known)."""
        table = self.states[name]
        known = 0 <= code < len(table) and (code > 0 or name in ("bucket", "all"))
        return table[code].copy() if known else np.zeros(4)


def sweep(jobs: pd.DataFrame, codes: Codes | None = None) -> tuple[pd.DataFrame, History]:
    """Features of every job (in `order(jobs)`), and the histories at the end, one cluster at a time."""
    jobs = order(jobs)
    codes = codes or Codes()
    capacity = capacities(jobs)
    encoded = {name: codes.encode(name, entity(jobs, name)) for name in ("user", "group", "queue")}
    encoded["bucket"] = bucket(jobs["processors_req"].astype("float64").to_numpy())
    sizes = {name: max(len(codes.maps.get(name, {})) + 1, 1) for name in ("user", "group", "queue")}
    sizes["bucket"] = max(int(encoded["bucket"].max(initial=0)) + 1, 64)
    state = np.full((len(jobs), len(STATE)), np.nan)
    history = np.full((len(jobs), len(HISTORY)), np.nan)
    recent = np.full((len(jobs), len(RECENT)), np.nan)
    recent_time, recent_z = np.zeros(0), np.zeros(0)
    states = {name: np.zeros((size, 4)) for name, size in sizes.items()}
    states["all"] = np.zeros((1, 4))
    submit = seconds(jobs["submit_time"])
    start_all = seconds(jobs["start_time"])
    end_all = seconds(jobs["end_time"])
    procs = jobs["processors_req"].astype("float64").fillna(1.0).clip(lower=1.0).to_numpy()
    req = jobs["wallclock_req"].astype("float64").fillna(UNKNOWN_REQ).clip(lower=1.0).to_numpy()
    until = float("-inf")
    for cluster in pd.unique(jobs["cluster"]):
        rows = np.flatnonzero((jobs["cluster"] == cluster).to_numpy())
        states["all"] = np.zeros((1, 4))  # one system's waits say little of another's
        start = np.where(np.isfinite(start_all[rows]), start_all[rows], -1.0)
        end = np.where(np.isfinite(end_all[rows]), end_all[rows], start)
        idx = np.arange(len(rows))
        known = start >= 0
        left = ~known & (end >= 0)  # left the queue at its end without running
        ev_time = np.concatenate([submit[rows], start[known], np.maximum(end[known], start[known]),
                                  np.maximum(end[left], submit[rows][left])])
        ev_kind = np.concatenate([np.full(len(rows), SUBMIT), np.full(known.sum(), START), np.full(known.sum(), END),
                                  np.full(left.sum(), END)])
        ev_job = np.concatenate([idx, idx[known], idx[known], idx[left]])
        sequence = np.lexsort((ev_job, ev_kind, ev_time))
        out_state = np.empty((len(rows), len(STATE)))
        out_history = np.empty((len(rows), len(HISTORY)))
        out_recent = np.empty((len(rows), len(RECENT)))
        started_time, started_z = np.empty(int(known.sum())), np.empty(int(known.sum()))
        _sweep(submit[rows], start, end, procs[rows], req[rows], encoded["queue"][rows], encoded["user"][rows],
               encoded["group"][rows], encoded["bucket"][rows], capacity[rows].astype(np.float64),
               states["user"], states["group"], states["queue"], states["bucket"], states["all"][0],
               ev_time[sequence], ev_kind[sequence].astype(np.int64), ev_job[sequence].astype(np.int64),
               out_state, out_history, out_recent, started_time, started_z)
        state[rows], history[rows], recent[rows] = out_state, out_history, out_recent
        until = max(until, float(np.max(start[known], initial=until)))
        last_day = started_time > until - DAY  # the sweep fills them in start order
        recent_time, recent_z = started_time[last_day], started_z[last_day]
    features = pd.concat([request_features(jobs, capacity),
                          pd.DataFrame(state, columns=STATE), pd.DataFrame(history, columns=HISTORY),
                          pd.DataFrame(recent, columns=RECENT)], axis=1)
    features["queue"] = encoded["queue"]
    return features, History(codes, states, until, recent_time, recent_z)


# ---------------------------------------------------------------- a snapshot from a scheduler
@dataclass
class Snapshot:
    """A queue at one moment: `time` (epoch seconds), the cluster's processors and zone, the running jobs and the
    pending ones in the order they are served (each a frame with user, group, queue, processors_req,
    wallclock_req, submit_time and, for running jobs, start_time; times as UTC timestamps)."""

    time: float
    capacity: float
    timezone: str
    cluster: str
    running: pd.DataFrame
    pending: pd.DataFrame


def _arrays(frame: pd.DataFrame, codes: Codes, cluster: str) -> dict[str, np.ndarray]:
    frame = frame.assign(cluster=cluster)
    return {
        "procs": frame["processors_req"].astype("float64").fillna(1.0).clip(lower=1.0).to_numpy(),
        "req": frame["wallclock_req"].astype("float64").fillna(UNKNOWN_REQ).clip(lower=1.0).to_numpy(),
        "queue": codes.encode("queue", entity(frame, "queue"), grow=False),
        "user": codes.encode("user", entity(frame, "user"), grow=False),
        "group": codes.encode("group", entity(frame, "group"), grow=False),
        "submit": seconds(frame["submit_time"]),
    }


def by_name(*queues: pd.Series) -> list[np.ndarray]:
    """The queue names of each series as codes shared by all of them, by name (0: none, matching none as in the
    sweep), for the queue features' comparisons: the model's codes know only the partitions it was trained on and
    give every other one the same code. A list `a,b` is a name of its own."""
    found, _ = pd.factorize(pd.concat(queues, ignore_index=True).astype("string"))
    codes = found.astype(np.int64) + 1  # factorize's -1 (no name) becomes 0
    return np.split(codes, np.cumsum([len(queue) for queue in queues])[:-1])


def snapshot_features(jobs: pd.DataFrame, snapshot: Snapshot, history: History) -> pd.DataFrame:
    """Features of `jobs` (submit-time records) at the snapshot's moment, by the functions the sweep uses.

    A job of the pending list is estimated with the jobs before it in the list ahead of it; any other job as if it
    were submitted now, behind every pending job. The running jobs that started after the history's last start
    have their waits folded into the history first, in start order. For a pending job the answer is then the wait
    from now (its remaining wait). The queue features compare partitions by name (`by_name`): the model's codes
    know only the partitions it was trained on."""
    codes = history.codes
    job = _arrays(jobs, codes, snapshot.cluster)
    run = _arrays(snapshot.running, codes, snapshot.cluster)
    pend = _arrays(snapshot.pending, codes, snapshot.cluster)
    run_start = seconds(snapshot.running["start_time"])
    pending_ids = {int(v): k for k, v in enumerate(snapshot.pending["job_id"])} if len(snapshot.pending) else {}
    user_b, bucket_b = job["user"], bucket(jobs["processors_req"].astype("float64").to_numpy())
    states = {name: {} for name in ENTITIES}

    def current(name: str, code: int) -> np.ndarray:
        if code not in states[name]:
            states[name][code] = history.state(name, code)
        return states[name][code]

    fresh = np.isfinite(run_start) & np.isfinite(run["submit"]) & (run_start > history.until) & \
        (run_start < snapshot.time)
    run_bucket = bucket(snapshot.running["processors_req"].astype("float64").to_numpy()) if len(run_start) else \
        np.zeros(0, np.int64)
    for k in np.flatnonzero(fresh)[np.argsort(run_start[fresh], kind="stable")]:
        z = float(np.log(max(run_start[k] - run["submit"][k], 0.0) + SHIFT))
        for name, code in (("user", run["user"][k]), ("group", run["group"][k]), ("queue", run["queue"][k])):
            if code > 0:
                _fold_wait(current(name, int(code)), z)
        _fold_wait(current("bucket", int(run_bucket[k])), z)
        _fold_wait(current("all", 0), z)
    fresh_z = np.log(np.maximum(run_start[fresh] - run["submit"][fresh], 0.0) + SHIFT)
    times = np.concatenate([history.recent_time, run_start[fresh]])
    by_time = np.argsort(times, kind="stable")
    times, zs = times[by_time], np.concatenate([history.recent_z, fresh_z])[by_time]
    recent = np.empty(len(RECENT))
    _recent_row(snapshot.time, times, zs, int(np.searchsorted(times, snapshot.time, side="left")), recent)
    n_run = len(run_start)
    size = n_run + AHEAD + 2
    scratch = (np.empty(max(n_run, 1)), np.empty(max(n_run, 1)), np.empty(size), np.empty(size))
    state = np.empty((len(jobs), len(STATE)))
    hist = np.empty((len(jobs), len(HISTORY)))
    start = np.where(np.isfinite(run_start), run_start, snapshot.time)
    job_queue, run_queue, pend_queue = by_name(jobs["queue"], snapshot.running["queue"], snapshot.pending["queue"])
    # the running jobs in the order of their ends, as `_snapshot_row` sorts them for every job: sorted once here, its
    # sort of each job finds them in order (the features are sums over them, or walk them by end)
    by_end = np.argsort(np.maximum(start + run["req"], snapshot.time + 60.0), kind="stable")
    running = [start[by_end], run["req"][by_end], run["procs"][by_end], run_queue[by_end], run["user"][by_end]]
    for i, job_id in enumerate(jobs["job_id"].to_numpy()):
        ahead = pending_ids.get(int(job_id), len(pend["procs"]))
        _snapshot_row(snapshot.time, snapshot.capacity, job["procs"][i], job["req"][i], job_queue[i],
                      job["user"][i], *running, n_run,
                      pend["submit"], pend["req"], pend["procs"], pend_queue, pend["user"], ahead,
                      *scratch, state[i])
        _history_row(current("user", int(user_b[i])) if user_b[i] > 0 else np.zeros(4),
                     current("group", int(job["group"][i])) if job["group"][i] > 0 else np.zeros(4),
                     current("queue", int(job["queue"][i])) if job["queue"][i] > 0 else np.zeros(4),
                     current("bucket", int(bucket_b[i])), current("all", 0), hist[i])
    at = jobs.assign(submit_time=pd.Timestamp(snapshot.time, unit="s", tz="UTC"), timezone=snapshot.timezone)
    capacity = np.full(len(jobs), snapshot.capacity)
    features = pd.concat([request_features(at.reset_index(drop=True), capacity),
                          pd.DataFrame(state, columns=STATE), pd.DataFrame(hist, columns=HISTORY),
                          pd.DataFrame(np.tile(recent, (len(jobs), 1)), columns=RECENT)], axis=1)
    features["queue"] = job["queue"]
    return features
