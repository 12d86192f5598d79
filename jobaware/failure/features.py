"""Submit-time features for failure prediction; the same code serves training and live requests.

A job's features use only what is known when it is submitted: its own request, and the history of jobs
(per user, account, job name or executable, queue, partition) that ENDED strictly before its submit time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from jobaware.failure.history import EVENT, STATE, EntityStates, Timeline, end_events, log_mem_per_proc
from jobaware.failure.schema import OUTCOMES

# history is kept per user, account, job name (SWF: executable), QoS and partition, and also per
# "job class" (the same user resubmitting the same shape of job: a stand-in where names are missing)
# and for the whole cluster (outages and bad periods hit everyone)
ENTITIES = ("user", "account", "name", "qos", "partition", "job_class", "cluster")
CATEGORICAL = ("partition", "qos")

HISTORY = (
    "n", "fail_rate", "timeout_rate", "oom_rate", "failed_rate", "node_fail_rate", "cancel_rate",
    "recent_fail", "last_failed", "streak", "since_fail_h", "since_end_h", "runfrac_mean",
    "hit_limit_rate", "log_run_mean", "log_run_max", "log_req_mean",
)
REQUEST = (
    "log_wallclock_req", "nodes_req", "processors_req", "gpus_req", "mem_req", "mem_set", "log_mem_per_proc",
    "hour", "weekday", "burst_size", "user_submits_24h", "user_submits_1h",
)
COMPARE = ("req_vs_run_mean", "req_vs_run_max", "req_vs_req_mean")
# the request's shape against what the partition's and the whole site's ended jobs asked for (log ratios): requested
# time against their largest and their mean (the largest stands in for the partition's time limit), processors
# likewise (the largest for the partition's size), memory per processor against the mean
SHAPE_ENTITIES = ("partition", "cluster")
SHAPE = ("req_vs_req_max", "req_vs_req_mean", "procs_vs_procs_max", "procs_vs_procs_mean", "mem_vs_mem_mean")
NUMERIC = (
    REQUEST
    + tuple(f"{e}_{h}" for e in ENTITIES for h in HISTORY)
    + tuple(f"{e}_{c}" for e in ("user", "name", "job_class") for c in COMPARE)
    + tuple(f"{e}_{c}" for e in SHAPE_ENTITIES for c in SHAPE)
)
FEATURES = NUMERIC + CATEGORICAL
# sizes in a site's own units (its nodes, processors, GPUs, memory) and names of its own (CATEGORICAL) say nothing
# at another site: the portable features leave them out, and the public-trace model is fitted on these alone
SITE_SCALE = ("nodes_req", "processors_req", "gpus_req", "mem_req")
PORTABLE = tuple(f for f in NUMERIC if f not in SITE_SCALE)
# the entity state columns that shape features read besides HISTORY
_SHAPE_STATE = ("log_req_max", "log_procs_mean", "log_procs_max", "log_mem_pp_mean")


def labels(jobs: pd.DataFrame) -> pd.Series:
    """The outcome class of each job; None for jobs whose end says nothing about the job (CANCELLED, ...)."""
    state = jobs["state"].astype("object")
    return state.where(state.isin(OUTCOMES), None)


SUBMIT_WINDOWS = {"user_submits_1h": 3600, "user_submits_24h": 86400}


def _submit_counts(jobs: pd.DataFrame, earlier: pd.DataFrame) -> pd.DataFrame:
    """Per job: how many jobs its user submitted in the same second (`burst_size`) and in the hour and the day
    up to and including that second. `earlier` holds other known jobs (the bundled history) that count too.

    Every job of one submit second sees the same counts; a job whose user is unknown gets none (NaN).
    """
    pool = pd.concat([earlier[["user", "submit_time"]].assign(_row=-1), jobs[["user", "submit_time"]].assign(_row=jobs.index)],
                     ignore_index=True).dropna(subset=["user"])
    pool = pool.assign(one=1.0).sort_values(["user", "submit_time"], kind="stable")
    same_second = pool.groupby(["user", "submit_time"], sort=False)
    counts = {"burst_size": same_second["one"].transform("size").astype(float)}
    for name, seconds in SUBMIT_WINDOWS.items():
        rolling = pool.set_index("submit_time").groupby("user", sort=False)["one"].rolling(f"{seconds}s", closed="both").sum()
        # all jobs of one submit second see the same count: the largest in that second
        counts[name] = pd.Series(rolling.to_numpy(), index=pool.index).groupby([pool["user"], pool["submit_time"]], sort=False).transform("max")
    mine = pool["_row"] >= 0
    return pd.DataFrame({name: c[mine].to_numpy() for name, c in counts.items()}, index=pool.loc[mine, "_row"]).reindex(jobs.index)


def _same_time_unit(jobs: pd.DataFrame) -> pd.DataFrame:
    """One datetime unit for every source (Parquet, CSV, joblib'd history), so times compare and merge."""
    return jobs.astype({c: "datetime64[s]" for c in ("submit_time", "start_time", "end_time") if c in jobs})


def job_class_keys(users: list, processors: list[float], wallclocks: list[float]) -> list[str | None]:
    """Each job's class key, "user|processors x wallclock" ("?" for an unknown request, None without a user):
    the one spelling of the batch featurizer and the serving path."""
    cores, limits = _spelled(processors, int), _spelled(wallclocks, float)
    return [f"{u}|{cores.get(p, '?')}x{limits.get(w, '?')}" if isinstance(u, str) else None
            for u, p, w in zip(users, processors, wallclocks, strict=True)]


def _spelled(values: list[float], kind) -> dict[float, str]:
    """Each distinct known request spelled once (an unknown one, NaN, is not a key: it is "?"; -0.0 is 0.0)."""
    known = {v for v in values if v == v}
    return {v: str(kind(v + 0.0)) for v in known}


def _with_derived_keys(jobs: pd.DataFrame) -> pd.DataFrame:
    keys = job_class_keys(jobs["user"].astype(object).tolist(), jobs["processors_req"].astype("float64").tolist(),
                          jobs["wallclock_req"].astype("float64").tolist())
    return jobs.assign(job_class=pd.array(keys, dtype="string"), cluster="all")


def prepared(jobs: pd.DataFrame) -> pd.DataFrame:
    """Canonical jobs with one time unit and the derived entity keys, indexed 0..n-1."""
    return _with_derived_keys(_same_time_unit(jobs.reset_index(drop=True)))


def recent_submissions(history: pd.DataFrame | None, jobs: pd.DataFrame) -> pd.DataFrame:
    """The history's jobs that can count in `jobs`' submit windows: the same users, the day before the first."""
    if history is None or history.empty:
        return jobs.iloc[:0]
    window = (history["submit_time"] >= jobs["submit_time"].min() - pd.Timedelta(hours=24)) & history["user"].isin(jobs["user"])
    return _same_time_unit(history[window])


def build_features(jobs: pd.DataFrame, history: pd.DataFrame | None = None) -> pd.DataFrame:
    """Feature table for `jobs` (canonical rows, any order). History comes from `jobs` itself plus `history`."""
    return Featurizer().window(jobs, history)


class Featurizer:
    """Features of jobs window by window, each entity's history and the day's submissions carried from one window
    to the next, so memory depends on the window and the number of entities, not on the length of history.

    Windows come in submit order, whole seconds each (no submit second split between two windows); the features
    of all windows equal those of one window holding every job, exactly.
    """

    def __init__(self) -> None:
        self.entities = {key: EntityStates() for key in ENTITIES}
        self.pending: pd.DataFrame | None = None  # end events not folded yet: they may lie after a later window's submits
        self.submissions = pd.DataFrame({"user": pd.array([], dtype="string"),
                                         "submit_time": np.array([], dtype="datetime64[s]")})
        self.jobs_seen = 0
        self.last_submit: int | None = None

    def window(self, jobs: pd.DataFrame, past: pd.DataFrame | None = None) -> pd.DataFrame:
        """Features of the next window of canonical jobs; `past` (jobs before any window, not featurized) adds
        history and submissions."""
        jobs = prepared(jobs)
        submit = jobs["submit_time"].to_numpy("datetime64[s]").astype(np.int64)
        if not len(jobs):
            empty = np.empty((0, len(STATE)))
            return assemble(jobs, submit, _submit_counts(jobs, self.submissions),
                            [history_columns(key, empty, submit) for key in ENTITIES])
        if self.last_submit is not None and submit.min() <= self.last_submit:
            raise ValueError("windows must come in submit order, each submit second in one window")
        past = None if past is None or past.empty else prepared(past)
        known = jobs if past is None else pd.concat([past, jobs], ignore_index=True)
        known["seq"] = np.arange(self.jobs_seen, self.jobs_seen + len(known))
        self.jobs_seen += len(known)
        codes = {key: self.entities[key].codes(known[key].to_numpy(dtype=object, na_value=None)) for key in ENTITIES}
        events = end_events(known)
        events = events.assign(**{f"_{key}": codes[key][events.index] for key in ENTITIES})
        pending = events.reset_index(drop=True)
        if self.pending is not None:
            pending = pd.concat([self.pending, pending], ignore_index=True)
        horizon = int(submit.max())
        due = pending["time"].to_numpy() < horizon  # no job of this window can see a later end
        now = pending[due].sort_values(["time", "seq"], kind="stable")
        self.pending = pending[~due].reset_index(drop=True)
        mine = slice(len(known) - len(jobs), len(known))
        history = []
        for key in ENTITIES:
            entity = self.entities[key]
            asked = codes[key][mine]
            before = entity.now(asked)
            after = entity.fold(now[f"_{key}"].to_numpy(), now["time"].to_numpy(), now[list(EVENT)].to_numpy())
            history.append(history_columns(key, Timeline(before, after).lookup(asked, submit), submit))
        earlier = self.submissions if past is None else pd.concat([self.submissions, recent_submissions(past, jobs)])
        counts = _submit_counts(jobs, earlier)
        day = pd.concat([earlier, jobs[["user", "submit_time"]]], ignore_index=True)
        self.submissions = day[day["submit_time"] >= jobs["submit_time"].max() - pd.Timedelta(hours=24)]
        self.last_submit = horizon
        return assemble(jobs, submit, counts, history)


def history_columns(key: str, state: np.ndarray, submit: np.ndarray) -> dict[str, np.ndarray]:
    """The HISTORY features of one entity kind from looked-up states (STATE columns) and the submit seconds."""
    columns = dict(zip(STATE, state.T, strict=True))
    columns["since_fail_h"] = (submit - columns["last_fail_t"]) / 3600
    columns["since_end_h"] = (submit - columns["last_end_t"]) / 3600
    return {f"{key}_{name}": columns[name] for name in HISTORY + (_SHAPE_STATE if key in SHAPE_ENTITIES else ())}


def history_timelines(history: pd.DataFrame) -> dict[str, tuple[EntityStates, Timeline]]:
    """Per entity kind: the entities of `history` (canonical jobs) and their state after each end event."""
    history = prepared(history).assign(seq=np.arange(len(history)))
    events = end_events(history).sort_values(["time", "seq"], kind="stable")
    timelines = {}
    for key in ENTITIES:
        entity = EntityStates()
        codes = entity.codes(history[key].to_numpy(dtype=object, na_value=None))[events.index]
        timelines[key] = entity, Timeline(entity.fold(codes, events["time"].to_numpy(), events[list(EVENT)].to_numpy()))
    return timelines


REQUEST_NUMBERS = ("wallclock_req", "nodes_req", "processors_req", "gpus_req", "mem_req")


def assemble(jobs: pd.DataFrame, submit: np.ndarray, counts, history: list[dict[str, np.ndarray]]) -> pd.DataFrame:
    """The feature table of canonical jobs (see `feature_block`), the categorical columns after the numbers."""
    number = {c: jobs[c].to_numpy(dtype=float, na_value=np.nan) for c in REQUEST_NUMBERS}
    categories = {key: jobs[key].to_numpy(dtype=object, na_value=None) for key in CATEGORICAL}
    return features_frame(feature_block(number, submit, counts, history), categories)


def features_frame(block: np.ndarray, categories: dict[str, np.ndarray]) -> pd.DataFrame:
    """The feature table from a `feature_block` and the CATEGORICAL columns."""
    frame = pd.DataFrame(block.T, columns=list(NUMERIC), copy=False)
    for key in CATEGORICAL:
        frame[key] = categories[key]
    return frame


def feature_block(number: dict[str, np.ndarray], submit: np.ndarray, counts,
                  history: list[dict[str, np.ndarray]]) -> np.ndarray:
    """The NUMERIC features, one row per feature (len(NUMERIC) x jobs), from the jobs' REQUEST_NUMBERS (float,
    NaN unknown), their submit seconds, their submit counts (`burst_size` and the SUBMIT_WINDOWS) and their
    per-entity history features."""
    req, procs, mem = number["wallclock_req"], number["processors_req"], number["mem_req"]
    with np.errstate(invalid="ignore", divide="ignore"):
        log_req, log_procs, log_mem_pp = np.log1p(req), np.log1p(procs), log_mem_per_proc(mem, procs)
        columns = {
            "log_wallclock_req": log_req, "nodes_req": number["nodes_req"], "processors_req": procs,
            "gpus_req": number["gpus_req"], "mem_req": mem,
            "mem_set": np.where(np.isnan(mem), np.nan, (mem > 0).astype(float)),
            "log_mem_per_proc": log_mem_pp,
            "hour": (submit // 3600 % 24).astype(float), "weekday": ((submit // 86400 + 3) % 7).astype(float),
            **{name: np.asarray(counts[name], dtype=float) for name in ("burst_size", *SUBMIT_WINDOWS)},
        }
        for entity in history:
            columns.update(entity)
        for key in ("user", "name", "job_class"):
            columns[f"{key}_req_vs_run_mean"] = log_req - columns[f"{key}_log_run_mean"]
            columns[f"{key}_req_vs_run_max"] = log_req - columns[f"{key}_log_run_max"]
            columns[f"{key}_req_vs_req_mean"] = log_req - columns[f"{key}_log_req_mean"]
        for key in SHAPE_ENTITIES:
            columns[f"{key}_req_vs_req_max"] = log_req - columns[f"{key}_log_req_max"]
            columns[f"{key}_req_vs_req_mean"] = log_req - columns[f"{key}_log_req_mean"]
            columns[f"{key}_procs_vs_procs_max"] = log_procs - columns[f"{key}_log_procs_max"]
            columns[f"{key}_procs_vs_procs_mean"] = log_procs - columns[f"{key}_log_procs_mean"]
            columns[f"{key}_mem_vs_mem_mean"] = log_mem_pp - columns[f"{key}_log_mem_pp_mean"]
    block = np.empty((len(NUMERIC), len(submit)))  # one row per feature: each filled in one contiguous write
    for i, name in enumerate(NUMERIC):
        block[i] = columns[name]
    return block
