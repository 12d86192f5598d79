"""Submit-time features for sizing; the same code serves training and live requests.

A job's features use only what is known when it is submitted: its own request, and the run times and memory of
jobs (of its user, its user's jobs of the same shape, its user's jobs of the same name or executable, its group,
its queue) that ENDED strictly before its submit second. Each entity keeps its last RING ended jobs; one compiled
walk over submit and end events in time order (an end at the same second as a submit comes after it) gives every
job the state of its entities as of its submit, and leaves the state after the last event for serving.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np
import pandas as pd

RING = 8  # ended jobs an entity remembers
# per ended job: log1p(run seconds), run / time asked, log1p(memory used MB per processor), memory used / asked
VALUES = ("log_run", "run_ratio", "log_mem", "mem_ratio")
ENTITIES = ("user", "shape", "program", "group", "queue")  # shape: user|procs|time asked; program: user|name
SUMMARY = ("n", "last", "tef", "recent_max", "max", "mean", "std", "ratio_max", "ratio_mean", "since_h",
           "mem_last", "mem_tef", "mem_recent_max", "mem_max", "mem_mean", "mem_ratio_max")
REQUEST = ("log_time_req", "log_procs", "log_mem_req", "hour", "weekday")
# an entity's run times and memory against this job's request (log ratios): what trees cannot subtract themselves
RELATIVE = tuple((f"{e}_{s}", "log_time_req") for e in ENTITIES for s in ("last", "tef", "recent_max", "max", "mean")) \
    + tuple((f"{e}_mem_{s}", "log_mem_req") for e in ENTITIES for s in ("last", "recent_max", "max", "mean"))
FEATURES = REQUEST + tuple(f"{e}_{s}" for e in ENTITIES for s in SUMMARY) + tuple(f"{a}_vs_req" for a, _ in RELATIVE)
_N, _LAST, _TEF, _RECENT, _MAX, _MEAN, _STD, _RMAX, _RMEAN, _SINCE = range(10)
_MLAST, _MTEF, _MRECENT, _MMAX, _MMEAN, _MRMAX = range(10, 16)


@numba.njit(cache=True)
def _summary(ring, count, last_end, submit, out):
    """The SUMMARY of one entity (its ring of the last RING ended jobs, how many ended, the last end) for a job
    submitted at `submit` (seconds)."""
    out[:] = np.nan
    out[_N] = np.log1p(count)
    if count == 0:
        return
    kept = min(count, RING)
    newest = (count - 1) % RING
    second = (count - 2) % RING
    out[_LAST] = ring[newest, 0]
    if count >= 2:
        out[_TEF] = np.log1p((np.expm1(ring[newest, 0]) + np.expm1(ring[second, 0])) / 2.0)
        out[_RECENT] = max(ring[newest, 0], ring[second, 0])
    else:
        out[_TEF] = ring[newest, 0]
        out[_RECENT] = ring[newest, 0]
    total, squares, top = 0.0, 0.0, -np.inf
    ratios, ratio_total, ratio_top = 0, 0.0, -np.inf
    mems, mem_total, mem_top, mem_ratio_top = 0, 0.0, -np.inf, -np.inf
    for k in range(kept):
        run = ring[k, 0]
        total += run
        squares += run * run
        top = max(top, run)
        if not np.isnan(ring[k, 1]):
            ratios += 1
            ratio_total += ring[k, 1]
            ratio_top = max(ratio_top, ring[k, 1])
        if not np.isnan(ring[k, 2]):
            mems += 1
            mem_total += ring[k, 2]
            mem_top = max(mem_top, ring[k, 2])
        if not np.isnan(ring[k, 3]):
            mem_ratio_top = max(mem_ratio_top, ring[k, 3])
    out[_MAX] = top
    out[_MEAN] = total / kept
    out[_STD] = np.sqrt(max(squares / kept - (total / kept) ** 2, 0.0))
    if ratios:
        out[_RMAX] = ratio_top
        out[_RMEAN] = ratio_total / ratios
    out[_SINCE] = (submit - last_end) / 3600.0
    out[_MLAST] = ring[newest, 2]
    recent = ring[newest, 2]
    if count >= 2 and not np.isnan(ring[second, 2]):
        recent = ring[second, 2] if np.isnan(recent) else max(recent, ring[second, 2])
    out[_MRECENT] = recent
    out[_MTEF] = ring[newest, 2]
    if count >= 2 and not np.isnan(ring[second, 2]) and not np.isnan(ring[newest, 2]):
        out[_MTEF] = np.log1p((np.expm1(ring[newest, 2]) + np.expm1(ring[second, 2])) / 2.0)
    if mems:
        out[_MMAX] = mem_top
        out[_MMEAN] = mem_total / mems
    if mem_ratio_top > -np.inf:
        out[_MRMAX] = mem_ratio_top


@numba.njit(cache=True)
def _walk(order, job_of, is_end, codes, values, times, rings, counts, last_end, out):
    """Events in time order: an end puts the job's VALUES into its entity's ring; a submit reads the entity's
    SUMMARY into `out` (one row per job)."""
    for e in order:
        job = job_of[e]
        code = codes[job]
        if code < 0:
            continue
        if is_end[e]:
            rings[code, counts[code] % RING, :] = values[job]
            counts[code] += 1
            last_end[code] = times[e]
        else:
            _summary(rings[code], counts[code], last_end[code], times[e], out[job])


@numba.njit(cache=True)
def _lookup(codes, submit, rings, counts, last_end, out):
    for job in range(len(codes)):
        code = codes[job]
        if code < 0:
            _summary(rings[0], 0, 0.0, submit[job], out[job])
        else:
            _summary(rings[code], counts[code], last_end[code], submit[job], out[job])


@dataclass
class EntityStates:
    """The last RING ended jobs of every entity of one kind, each entity known by an integer code."""

    code_of: dict[str, int] = field(default_factory=dict)
    rings: np.ndarray = field(default_factory=lambda: np.full((1, RING, len(VALUES)), np.nan))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    last_end: np.ndarray = field(default_factory=lambda: np.zeros(1))

    def codes(self, keys: np.ndarray) -> np.ndarray:
        """Each key's entity code (-1: no key); a key not seen before gets a new entity."""
        inverse, uniques = pd.factorize(keys)
        known = np.array([self.code_of.setdefault(k, len(self.code_of)) for k in uniques], dtype=np.int64)
        if len(self.code_of) > len(self.counts):
            grow = len(self.code_of) - len(self.counts)
            self.rings = np.concatenate([self.rings, np.full((grow, RING, len(VALUES)), np.nan)])
            self.counts = np.concatenate([self.counts, np.zeros(grow, np.int64)])
            self.last_end = np.concatenate([self.last_end, np.zeros(grow)])
        return np.append(known, -1)[inverse]

    def lookup(self, keys: np.ndarray, submit: np.ndarray) -> np.ndarray:
        """The SUMMARY of each key's entity as it stands now, for jobs submitted at `submit` (no new entity)."""
        codes = np.fromiter((self.code_of.get(k, -1) if k is not None else -1 for k in keys), np.int64, len(keys))
        out = np.empty((len(keys), len(SUMMARY)))
        _lookup(codes, submit.astype(float), self.rings, self.counts, self.last_end, out)
        return out


def entity_keys(jobs: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each job's key of every entity kind (None where the job has none)."""
    user = jobs["user"].to_numpy(dtype=object, na_value=None)
    has_user = pd.notna(user)

    def joined(*parts: np.ndarray) -> np.ndarray:
        text = pd.Series(user, dtype=object).astype(str)
        for part in parts:
            text = text + "|" + pd.Series(part, dtype=object).astype(str)
        known = has_user & np.logical_and.reduce([pd.notna(p) for p in parts])
        return np.where(known, text.to_numpy(dtype=object), None)

    procs = jobs["procs"].to_numpy(dtype=float, na_value=np.nan)
    asked = jobs["time_req_s"].to_numpy(dtype=float, na_value=np.nan)
    shape = np.array([f"{p:.0f}x{t:.0f}" if p == p and t == t else None for p, t in zip(procs, asked, strict=True)],
                     dtype=object)
    return {"user": user, "shape": joined(shape), "program": joined(jobs["name"].to_numpy(dtype=object, na_value=None)),
            "group": jobs["group"].to_numpy(dtype=object, na_value=None),
            "queue": jobs["queue"].to_numpy(dtype=object, na_value=None)}


def seconds(column: pd.Series) -> np.ndarray:
    """Times as float seconds since the epoch (NaN unknown)."""
    values = pd.to_datetime(column, utc=True)
    out = values.dt.tz_localize(None).to_numpy("datetime64[s]").astype("int64").astype(float)
    out[values.isna().to_numpy()] = np.nan
    return out


def ended_values(jobs: pd.DataFrame) -> np.ndarray:
    """The VALUES of each job once ended (NaN where unknown)."""
    run = jobs["run_s"].to_numpy(dtype=float, na_value=np.nan)
    asked = jobs["time_req_s"].to_numpy(dtype=float, na_value=np.nan)
    mem = jobs["mem_used_mb"].to_numpy(dtype=float, na_value=np.nan)
    mem_asked = jobs["mem_req_mb"].to_numpy(dtype=float, na_value=np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.column_stack([np.log1p(run), run / asked, np.log1p(mem), mem / mem_asked])


def request_features(jobs: pd.DataFrame, submit: np.ndarray) -> dict[str, np.ndarray]:
    with np.errstate(invalid="ignore"):
        return {"log_time_req": np.log1p(jobs["time_req_s"].to_numpy(dtype=float, na_value=np.nan)),
                "log_procs": np.log1p(jobs["procs"].to_numpy(dtype=float, na_value=np.nan)),
                "log_mem_req": np.log1p(jobs["mem_req_mb"].to_numpy(dtype=float, na_value=np.nan)),
                "hour": submit // 3600 % 24, "weekday": (submit // 86400 + 3) % 7}


def frame(request: dict[str, np.ndarray], summaries: dict[str, np.ndarray]) -> pd.DataFrame:
    columns = dict(request)
    for kind, block in summaries.items():
        columns.update({f"{kind}_{name}": block[:, i] for i, name in enumerate(SUMMARY)})
    for value, request in RELATIVE:
        columns[f"{value}_vs_req"] = columns[value] - columns[request]
    return pd.DataFrame({name: columns[name] for name in FEATURES})


def build_features(jobs: pd.DataFrame, states: dict[str, EntityStates] | None = None) -> tuple[pd.DataFrame, dict[str, EntityStates]]:
    """The features of `jobs` (any order; rows in their order), each from the jobs of `jobs` that ended before its
    submit second (and whatever `states` already hold: history before every job of `jobs`), and the entity states
    after the last event."""
    states = states if states is not None else {kind: EntityStates() for kind in ENTITIES}
    submit = seconds(jobs["submit_time"])
    end = seconds(jobs["end_time"])
    ended = np.isfinite(end) & jobs["run_s"].notna().to_numpy()
    n = len(jobs)
    done = np.flatnonzero(ended)
    times = np.concatenate([submit, np.maximum(end[done], submit[done])])
    is_end = np.concatenate([np.zeros(n, bool), np.ones(len(done), bool)])
    job_of = np.concatenate([np.arange(n), done]).astype(np.int64)
    order = np.lexsort((is_end, times)).astype(np.int64)
    values = np.ascontiguousarray(ended_values(jobs))
    summaries = {}
    for kind, keys in entity_keys(jobs).items():
        state = states[kind]
        codes = state.codes(keys)
        out = np.full((n, len(SUMMARY)), np.nan)
        _walk(order, job_of, is_end, codes, values, times, state.rings, state.counts, state.last_end, out)
        summaries[kind] = out
    return frame(request_features(jobs, submit), summaries), states


def live_features(jobs: pd.DataFrame, states: dict[str, EntityStates]) -> pd.DataFrame:
    """The features of jobs asked about now (not ended), from the entity states as they stand."""
    submit = seconds(jobs["submit_time"])
    summaries = {kind: states[kind].lookup(keys, submit) for kind, keys in entity_keys(jobs).items()}
    return frame(request_features(jobs, submit), summaries)
