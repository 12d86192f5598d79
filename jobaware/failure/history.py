"""Each entity's cumulative history, folded over end events in time order and carried from one batch to the next.

An entity (a user, an account, a job name, ...) has a state: how many of its jobs ended, how they ended, how long
they ran, and what they had asked for (time, processors, memory per processor: their means and largest values). The state is folded one end event at a time, in the order (event time, job sequence number), by one
compiled loop, so folding the events in several batches gives bit for bit the state that one batch gives: this is
what lets the featurizer work window by window in bounded memory and equal the in-memory answer exactly.

A job's end event happens at its end time, or at its submit time if the record ends it earlier: no job's end is
known before the job exists. A job that ended without ever starting (the platform's rule,
`jobaware.store.export.never_started`: cancelled while pending or held, as held test jobs and withdrawn submissions
are) did no work and has no end event.
"""

from __future__ import annotations

from itertools import repeat

import numba
import numpy as np
import pandas as pd

from jobaware.failure.schema import FAILURES
from jobaware.jobtable.schema import UNFINISHED
from jobaware.store.export import never_started

RECENT = 5
EPOCH = pd.Timestamp(0)
HIT_LIMIT = 0.95
OUTCOME_FLAGS = {"timeout": "TIMEOUT", "oom": "OUT_OF_MEMORY", "failed": "FAILED", "node_fail": "NODE_FAIL",
                 "cancel": "CANCELLED"}
# an entity's state as features see it: the history features but the two "since" ones, then the times of its last
# failure and last end (float seconds since the epoch, NaN when none) from which those two are computed
STATE = ("n", "fail_rate", *(f"{name}_rate" for name in OUTCOME_FLAGS), "recent_fail", "last_failed", "streak",
         "runfrac_mean", "hit_limit_rate", "log_run_mean", "log_run_max", "log_req_mean", "log_req_max",
         "log_procs_mean", "log_procs_max", "log_mem_pp_mean", "last_fail_t", "last_end_t")
# the event columns the fold reads, in this order: the outcome flags, then the values whose means it keeps (MEANS)
MEANS = ("runfrac", "hit", "log_run", "log_req", "log_procs", "log_mem_pp")
EVENT = ("fail", *OUTCOME_FLAGS, *MEANS)
# the values of MEANS whose largest value it keeps too (positions in MEANS): run time, requested time, processors
_MAXIMA = (2, 3, 4)

# the running sums one entity carries (one row of `EntityStates.sums`)
_N, _FAIL, _FLAGS, _LAST_FAILED, _STREAK, _FAIL_T, _END_T = 0, 1, 2, 7, 8, 9, 10
_MEANS = 11  # (sum, count) pairs of the MEANS values
_MAX = _MEANS + 2 * len(MEANS)  # the largest value of each of _MAXIMA
_RING = _MAX + len(_MAXIMA)  # the fail flags of the last RECENT events, a ring
_COMPENSATION = _RING + RECENT  # the sums' Kahan compensations
_WIDTH = _COMPENSATION + len(MEANS)
# where each MEANS value's mean and each maximum go in a STATE row
_MEAN_OUT = np.array([STATE.index(f"{name}_mean" if name not in ("hit",) else "hit_limit_rate") for name in MEANS])
_MAX_OUT = np.array([STATE.index(f"{MEANS[m]}_max") for m in _MAXIMA])
_MAX_OF = np.array(_MAXIMA)


@numba.njit(cache=True)
def _state_row(sums, out):
    """The STATE columns of one entity from its running sums."""
    n = sums[_N]
    out[0] = n
    out[1] = (sums[_FAIL] + 0.5) / (n + 1.0)  # Laplace-style smoothing with a fixed prior, no global statistic
    for f in range(5):
        out[2 + f] = (sums[_FLAGS + f] + 0.5) / (n + 1.0)
    recent = min(n, RECENT)
    total = 0.0
    for r in range(int(recent)):
        total += sums[_RING + r]
    out[7] = total / recent if recent > 0 else np.nan
    out[8] = sums[_LAST_FAILED]
    out[9] = sums[_STREAK]
    for m in range(len(_MEAN_OUT)):  # (sum, count) pairs
        count = sums[_MEANS + 2 * m + 1]
        out[_MEAN_OUT[m]] = sums[_MEANS + 2 * m] / count if count > 0 else np.nan
    for k in range(len(_MAX_OUT)):
        out[_MAX_OUT[k]] = sums[_MAX + k] if sums[_MEANS + 2 * _MAX_OF[k] + 1] > 0 else np.nan
    out[-2] = sums[_FAIL_T]
    out[-1] = sums[_END_T]


@numba.njit(cache=True)
def _fold(codes, times, events, sums, out):
    """Fold end events (sorted by time, then sequence) into the entities' running sums; the state after each
    event goes to `out`."""
    for i in range(len(codes)):
        s = sums[codes[i]]
        e = events[i]
        fail = e[0]
        s[_RING + int(s[_N]) % RECENT] = fail
        s[_N] += 1.0
        s[_FAIL] += fail
        for f in range(5):
            s[_FLAGS + f] += e[1 + f]
        s[_LAST_FAILED] = fail
        s[_STREAK] = s[_STREAK] + 1.0 if fail == 1.0 else 0.0
        if fail == 1.0:
            s[_FAIL_T] = times[i]
        s[_END_T] = times[i]
        for m in range(len(_MEAN_OUT)):
            value = e[6 + m]
            known = not np.isnan(value)
            at, compensation = _MEANS + 2 * m, _COMPENSATION + m
            y = (value if known else 0.0) - s[compensation]  # Kahan summation, as pandas' cumulative sums do
            total = s[at] + y
            s[compensation] = total - s[at] - y
            if np.isnan(s[compensation]):  # an infinite value: no compensation
                s[compensation] = 0.0
            s[at] = total
            if known:
                s[at + 1] += 1.0
                for k in range(len(_MAX_OF)):
                    if _MAX_OF[k] == m and (s[at + 1] == 1.0 or value > s[_MAX + k]):
                        s[_MAX + k] = value
        _state_row(s, out[i])


@numba.njit(cache=True)
def _state_rows(sums, codes, out):
    for i in range(len(codes)):
        _state_row(sums[codes[i]], out[i])


def log_mem_per_proc(mem: np.ndarray, procs: np.ndarray) -> np.ndarray:
    """log(1 + memory per processor in MB), NaN where either is unknown or not positive: the one spelling of the
    request feature and the history's mean."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log1p(np.where(mem > 0, mem, np.nan) / np.where(procs > 0, procs, np.nan))


def end_events(jobs: pd.DataFrame) -> pd.DataFrame:
    """The end events of prepared jobs (those with a final state and an end time): event time (int64 seconds),
    the job's sequence number `seq`, its entity columns, and the EVENT columns the fold reads."""
    seconds = {column: (jobs[column] - EPOCH).dt.total_seconds().to_numpy() for column in ("start_time", "end_time")}
    unstarted = never_started(jobs["state"], seconds["start_time"], seconds["end_time"],
                              jobs["run_time"].to_numpy(float, na_value=np.nan))
    done = jobs["end_time"].notna() & jobs["state"].notna() & ~jobs["state"].isin(UNFINISHED) & ~unstarted
    ended = jobs.loc[done]
    state = ended["state"].astype("object").to_numpy()
    run = ended["run_time"].astype(float).to_numpy()
    req = ended["wallclock_req"].astype(float).to_numpy()
    procs, mem = ended["processors_req"].astype(float).to_numpy(), ended["mem_req"].astype(float).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        runfrac = np.minimum(run / np.where(req > 0, req, np.nan), 1.5)
        log_run, log_req = np.log1p(run), np.log1p(req)
    end = ended["end_time"].to_numpy("datetime64[s]").astype(np.int64)
    submit = ended["submit_time"].to_numpy("datetime64[s]").astype(np.int64)
    columns = {
        "time": np.maximum(end, submit), "seq": ended["seq"].to_numpy(np.int64),
        "fail": np.isin(state, FAILURES).astype(float),
        **{name: (state == value).astype(float) for name, value in OUTCOME_FLAGS.items()},
        "runfrac": runfrac, "hit": np.where(np.isnan(runfrac), np.nan, (runfrac >= HIT_LIMIT).astype(float)),
        "log_run": log_run, "log_req": log_req, "log_procs": np.log1p(procs), "log_mem_pp": log_mem_per_proc(mem, procs),
    }
    return pd.DataFrame(columns, index=ended.index)


class EntityStates:
    """The running sums of every entity of one kind, each entity known by an integer code."""

    def __init__(self) -> None:
        self.code_of: dict[str, int] = {}
        self.sums = np.zeros((0, _WIDTH))

    def codes(self, values) -> np.ndarray:
        """Each value's entity code (-1: no entity); a value not seen before gets a new entity."""
        inverse, uniques = pd.factorize(np.asarray(values, dtype=object))
        known = np.empty(len(uniques), dtype=np.int64)
        for i, value in enumerate(uniques):
            known[i] = self.code_of.setdefault(value, len(self.code_of))
        if len(self.code_of) > len(self.sums):
            grown = np.zeros((len(self.code_of), _WIDTH))
            grown[: len(self.sums)] = self.sums
            grown[len(self.sums):, _FAIL_T:_END_T + 1] = np.nan
            self.sums = grown
        return np.append(known, -1)[inverse]  # factorize marks a missing value -1: the appended -1

    def lookup_codes(self, values) -> np.ndarray:
        """Each value's entity code without adding new ones (-1: unknown or no entity)."""
        return np.fromiter(map(self.code_of.get, values, repeat(-1)), np.int64, len(values))

    def now(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The current state of the given entities that have any history, each at the time of its last event:
        (entity codes, times, STATE rows)."""
        codes = np.unique(codes[codes >= 0])
        codes = codes[self.sums[codes, _N] > 0]
        rows = np.empty((len(codes), len(STATE)))
        _state_rows(self.sums, codes, rows)
        return codes, rows[:, -1].astype(np.int64), rows

    def fold(self, codes: np.ndarray, times: np.ndarray, events: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fold events (sorted by time, then sequence; `events` holds the EVENT columns) of the entities `codes`
        (-1: none); return the state after each event: (entity codes, times, STATE rows)."""
        mine = codes >= 0
        codes, times, events = codes[mine], times[mine], np.ascontiguousarray(events[mine])
        rows = np.empty((len(codes), len(STATE)))
        _fold(codes, times.astype(float), events, self.sums, rows)
        return codes, times, rows


class Timeline:
    """States of entities after their events, sorted by (entity, time) so that many jobs are looked up at once."""

    def __init__(self, *parts: tuple[np.ndarray, np.ndarray, np.ndarray]):
        """From (codes, times, STATE rows) parts, each in time order and each later than the one before it."""
        codes, times, rows = (np.concatenate(column) for column in zip(*parts, strict=True))
        order = np.argsort(codes, kind="stable")  # keeps each entity's states in time order, the latest last
        self.codes, self.rows = codes[order], rows[order]
        times = times[order]
        self.first = int(times.min()) if len(times) else 0
        self.span = int(times.max()) - self.first + 2 if len(times) else 2
        self.keys = self.codes * self.span + (times - self.first)  # (entity, time) as one sortable number

    def lookup(self, codes: np.ndarray, submit: np.ndarray) -> np.ndarray:
        """Each job's state (STATE columns) as of its submit second: its entity's last state from an event
        strictly before it; NaN but n = 0 when there is none."""
        offset = np.clip(submit - self.first, 0, self.span - 1)
        at = np.searchsorted(self.keys, codes * self.span + offset, side="left") - 1
        hit = (codes >= 0) & (at >= 0)
        hit[hit] = self.codes[at[hit]] == codes[hit]
        found = np.where(hit, at, -1)
        state = np.full((len(codes), len(STATE)), np.nan)
        state[found >= 0] = self.rows[found[found >= 0]]
        state[:, 0] = np.where(np.isnan(state[:, 0]), 0.0, state[:, 0])
        return state
