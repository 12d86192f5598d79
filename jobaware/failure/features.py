"""Submit-time features for failure prediction; the same code serves training and live requests.

A job's features use only what is known when it is submitted: its own request, and the history of jobs
(per user, account, job name or executable, queue, partition) that ENDED strictly before its submit time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from jobaware.failure.schema import FAILURES, OUTCOMES, UNFINISHED

# history is kept per user, account, job name (SWF: executable), QoS and partition, and also per
# "job class" (the same user resubmitting the same shape of job: a stand-in where names are missing)
# and for the whole cluster (outages and bad periods hit everyone)
ENTITIES = ("user", "account", "name", "qos", "partition", "job_class", "cluster")
CATEGORICAL = ("partition", "qos")
RECENT = 5
HIT_LIMIT = 0.95

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
NUMERIC = (
    REQUEST
    + tuple(f"{e}_{h}" for e in ENTITIES for h in HISTORY)
    + tuple(f"{e}_{c}" for e in ("user", "name", "job_class") for c in COMPARE)
)
FEATURES = NUMERIC + CATEGORICAL


def labels(jobs: pd.DataFrame) -> pd.Series:
    """The outcome class of each job; None for jobs whose end says nothing about the job (CANCELLED, ...)."""
    state = jobs["state"].astype("object")
    return state.where(state.isin(OUTCOMES), None)


_OUTCOME_FLAGS = {"timeout": "TIMEOUT", "oom": "OUT_OF_MEMORY", "failed": "FAILED", "node_fail": "NODE_FAIL",
                  "cancel": "CANCELLED"}


def _ended(jobs: pd.DataFrame) -> pd.DataFrame:
    """Jobs with a final state and end time, with their outcome flags and run ratios computed once."""
    done = jobs["end_time"].notna() & jobs["state"].notna() & ~jobs["state"].isin(UNFINISHED)
    ended = jobs.loc[done]
    state = ended["state"].astype("object").to_numpy()
    run = ended["run_time"].astype(float).to_numpy()
    req = ended["wallclock_req"].astype(float).to_numpy()
    runfrac = np.minimum(run / np.where(req > 0, req, np.nan), 1.5)
    flags = {f"_{name}": (state == value).astype(float) for name, value in _OUTCOME_FLAGS.items()}
    return ended.assign(
        _fail=np.isin(state, FAILURES).astype(float),
        **flags,
        _runfrac=runfrac,
        _hit=np.where(np.isnan(runfrac), np.nan, (runfrac >= HIT_LIMIT).astype(float)),
        _log_run=np.log1p(run),
        _log_req=np.log1p(req),
    )


def _entity_states(ended: pd.DataFrame, key: str) -> pd.DataFrame:
    """For each end event of an entity, its cumulative history state right after that end.

    `key` holds integer entity codes (-1: no entity), so grouping never re-hashes strings.
    """
    columns = [key, "end_time", "_fail", *(f"_{n}" for n in _OUTCOME_FLAGS), "_runfrac", "_hit", "_log_run", "_log_req"]
    ev = ended.loc[ended[key].to_numpy() >= 0, columns]
    ev = ev.sort_values([key, "end_time"], kind="stable").reset_index(drop=True)
    group = ev.groupby(key, sort=False)
    fail = ev["_fail"]
    idx = group.cumcount().astype(float)
    n = idx + 1

    def cum(values: pd.Series) -> pd.Series:
        return values.groupby(ev[key], sort=False).cumsum()

    def rate(values: pd.Series) -> pd.Series:
        return (cum(values) + 0.5) / (n + 1.0)  # Laplace-style smoothing with a fixed prior, no global statistic

    def mean(values: pd.Series) -> pd.Series:
        present = values.notna().astype(float)
        return cum(values.fillna(0.0)) / cum(present).where(lambda c: c > 0)

    cum_fail = cum(fail)
    back = cum_fail.groupby(ev[key], sort=False).shift(RECENT).fillna(0.0)
    nonfail_at = pd.Series(np.where(fail == 0, idx, np.nan)).groupby(ev[key], sort=False).ffill()
    fail_end = ev["end_time"].where(fail == 1).groupby(ev[key], sort=False).ffill()
    return pd.DataFrame(
        {
            key: ev[key].to_numpy(),
            "t": ev["end_time"].to_numpy(),
            "n": n,
            "fail_rate": rate(fail),
            **{f"{name}_rate": rate(ev[f"_{name}"]) for name in _OUTCOME_FLAGS},
            "recent_fail": (cum_fail - back) / np.minimum(n, RECENT),
            "last_failed": fail,
            "streak": idx - nonfail_at.fillna(-1.0),
            "last_fail_t": fail_end.to_numpy(),
            "last_end_t": ev["end_time"].to_numpy(),
            "runfrac_mean": mean(ev["_runfrac"]),
            "hit_limit_rate": mean(ev["_hit"]),
            "log_run_mean": mean(ev["_log_run"]),
            "log_run_max": ev["_log_run"].groupby(ev[key], sort=False).cummax(),
            "log_req_mean": mean(ev["_log_req"]),
        }
    )


def history_states(past: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per entity key: its cumulative state after each end event, keyed by the entity's value (`_value`)."""
    ended = _ended(_with_derived_keys(_same_time_unit(past)))
    states = {}
    for key in ENTITIES:
        codes, uniques = pd.factorize(ended[key])
        table = _entity_states(ended.assign(_key=codes), "_key")
        table["_value"] = np.asarray(uniques, dtype=object)[table["_key"].to_numpy()]
        states[key] = table.drop(columns="_key")
    return states


def _history(queries: pd.DataFrame, states: pd.DataFrame, key: str) -> pd.DataFrame:
    """History of `key` as of each query's submit time (ends strictly before it)."""
    codes, _ = pd.factorize(pd.concat([states["_value"], queries[key].astype(object)], ignore_index=True))
    states = states.assign(_key=codes[: len(states)]).drop(columns="_value").sort_values("t", kind="stable")
    q = pd.DataFrame({"_key": codes[len(states):], "t": queries["submit_time"].to_numpy(), "_row": queries.index})
    q = q[q["_key"] >= 0].sort_values("t", kind="stable")
    merged = pd.merge_asof(q, states, on="t", by="_key", allow_exact_matches=False, direction="backward")
    merged = merged.set_index("_row").reindex(queries.index)
    hours = lambda since: (queries["submit_time"] - since).dt.total_seconds() / 3600  # noqa: E731
    merged["since_fail_h"] = hours(pd.to_datetime(merged["last_fail_t"]))
    merged["since_end_h"] = hours(pd.to_datetime(merged["last_end_t"]))
    merged["n"] = merged["n"].fillna(0.0)
    return merged[list(HISTORY)].add_prefix(f"{key}_")


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


def _with_derived_keys(jobs: pd.DataFrame) -> pd.DataFrame:
    shape = jobs["processors_req"].astype("string").fillna("?") + "x" + jobs["wallclock_req"].astype("string").fillna("?")
    return jobs.assign(job_class=jobs["user"].astype("string") + "|" + shape, cluster="all")


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
    """Feature table for `jobs` (canonical rows). History comes from `jobs` itself plus `history`."""
    jobs = prepared(jobs)
    history = None if history is None or history.empty else history
    states = history_states(jobs if history is None else pd.concat([history, jobs], ignore_index=True))
    counts = _submit_counts(jobs, recent_submissions(history, jobs))
    return assemble(jobs, counts, [_history(jobs, states[key], key) for key in ENTITIES])


def assemble(jobs: pd.DataFrame, counts: pd.DataFrame, history: list[pd.DataFrame]) -> pd.DataFrame:
    """The feature table from prepared jobs, their submit counts and their per-entity history features."""
    req = jobs["wallclock_req"].astype(float)
    procs = jobs["processors_req"].astype(float)
    mem = jobs["mem_req"].astype(float)
    submit = jobs["submit_time"]
    features = pd.DataFrame(
        {
            "log_wallclock_req": np.log1p(req),
            "nodes_req": jobs["nodes_req"].astype(float),
            "processors_req": procs,
            "gpus_req": jobs["gpus_req"].astype(float),
            "mem_req": mem,
            "mem_set": (mem > 0).astype(float).where(mem.notna()),
            "log_mem_per_proc": np.log1p(mem.where(mem > 0) / procs.where(procs > 0)),
            "hour": submit.dt.hour.astype(float),
            "weekday": submit.dt.weekday.astype(float),
            "burst_size": counts["burst_size"],
            "user_submits_24h": counts["user_submits_24h"],
            "user_submits_1h": counts["user_submits_1h"],
        }
    )
    features = pd.concat([features, *history], axis=1)
    log_req = np.log1p(req)
    compare = {}
    for key in ("user", "name", "job_class"):
        compare[f"{key}_req_vs_run_mean"] = log_req - features[f"{key}_log_run_mean"]
        compare[f"{key}_req_vs_run_max"] = log_req - features[f"{key}_log_run_max"]
        compare[f"{key}_req_vs_req_mean"] = log_req - features[f"{key}_log_req_mean"]
    categorical = {key: jobs[key].astype("object").where(jobs[key].notna(), None) for key in CATEGORICAL}
    return pd.concat([features, pd.DataFrame(compare), pd.DataFrame(categorical)], axis=1)[list(FEATURES)]
