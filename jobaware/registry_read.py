"""Reading the MLflow registry and runs for the commands that only read (`models list|show`, `runs list|show`,
`capabilities`, a pipeline run's summary) without MLflow's client.

Importing MLflow and opening its SQLAlchemy store costs a command that prints a table several seconds of CPU
(bench/cli_read.py measures it). On the embedded store (a `sqlite:///` tracking URI, artifacts in local folders) this
module reads MLflow's tables and artifact files directly, read-only, after checking that the tables have the columns
it reads; anywhere else (a tracking server, another database, a schema it does not know) it asks `jobaware.tracking`,
which goes through MLflow's client. tests/jobaware/test_registry_read.py holds both ways to the same answers.
Writing (runs, registering, aliases) always goes through MLflow.
"""

from __future__ import annotations

import json
import math
import sqlite3
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlparse

from jobaware import capabilities, config
from jobaware.errors import JobawareError

# the tables and columns read here (MLflow 3.x); a store without any of them is read through MLflow's client
COLUMNS = {
    "model_versions": {"name", "version", "run_id", "creation_time", "current_stage"},
    "registered_model_aliases": {"name", "alias", "version"},
    "model_version_tags": {"name", "version", "key", "value"},
    "experiments": {"experiment_id", "name", "lifecycle_stage"},
    "runs": {"run_uuid", "name", "status", "start_time", "lifecycle_stage", "artifact_uri", "experiment_id"},
    "latest_metrics": {"run_uuid", "key", "value", "is_nan"},
    "params": {"run_uuid", "key", "value"},
    "tags": {"run_uuid", "key", "value"},
}
DELETED = "Deleted_Internal"  # MLflow's mark of a deleted model version
PROFILE = "fit/profile.json"
METRICS = "metrics/all.json"
SWEEP_TAG = "jobaware.sweep_run_id"
FEATURE_TAG = "jobaware.feature_version"


class _Store:
    """MLflow's SQLite tables, opened read-only."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.workspace = {}

    def known(self) -> bool:
        for table, wanted in COLUMNS.items():
            have = {row[1] for row in self.db.execute(f"pragma table_info({table})")}
            if not wanted <= have:
                return False
            self.workspace[table] = "workspace" in have
        return True

    def rows(self, sql: str, args: tuple = (), table: str | None = None) -> list[tuple]:
        """Rows of `sql`; `table`'s rows are those of the default workspace where the store has workspaces."""
        if table and self.workspace.get(table):
            sql = sql.replace("WHERE", "WHERE workspace = 'default' AND", 1) if "WHERE" in sql else sql
        return self.db.execute(sql, args).fetchall()

    def run_values(self, table: str, run_id: str) -> dict:
        if table == "latest_metrics":
            found = self.rows("SELECT key, value, is_nan FROM latest_metrics WHERE run_uuid = ?", (run_id,))
            return {key: float("nan") if is_nan else float(value) for key, value, is_nan in found}
        return dict(self.rows(f"SELECT key, value FROM {table} WHERE run_uuid = ?", (run_id,)))

    def run(self, run_id: str) -> tuple | None:
        found = self.rows("SELECT run_uuid, name, status, start_time, artifact_uri, experiment_id FROM runs "
                          "WHERE run_uuid = ?", (run_id,))
        return found[0] if found else None

    def artifact(self, run_id: str, path: str) -> Path | None:
        """A local artifact file of a run; None where the run's artifacts are not in a local folder."""
        run = self.run(run_id)
        folder = _local(run[4]) if run else None
        return folder / path if folder is not None else None


def _local(uri: str | None) -> Path | None:
    if not uri:
        return None
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    return Path(uri) if parsed.scheme == "" else None


@cache
def _open(path: str) -> _Store | None:
    store = _Store(Path(path))
    return store if store.known() else None


def _store() -> _Store | None:
    """The embedded store, or None where MLflow's client must read (not SQLite, or an unknown schema)."""
    path = config.local_registry(config.tracking_uri(create=False))
    if path is None:
        return None
    if not path.is_file():
        raise JobawareError(f"no MLflow store at {path} (JOBAWARE_HOME={config.home(create=False)}); "
                            "run a pipeline first, or set JOBAWARE_HOME or MLFLOW_TRACKING_URI to the store you use")
    try:
        return _open(str(path))
    except sqlite3.Error as exc:
        raise JobawareError(f"{path}: cannot read the MLflow store ({exc})") from None


def _when(ms: int | None) -> str:
    return datetime.fromtimestamp((ms or 0) / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _versions(store: _Store, name: str) -> list[tuple]:
    return store.rows("SELECT version, run_id, creation_time FROM model_versions WHERE name = ? AND current_stage "
                      "!= ? ORDER BY version", (name, DELETED), "model_versions")


def _aliases(store: _Store, name: str) -> dict[str, str]:
    return {alias: str(version) for alias, version in store.rows(
        "SELECT alias, version FROM registered_model_aliases WHERE name = ?", (name,), "registered_model_aliases")}


def _score(store: _Store, name: str, version, run_id: str, metric: str) -> float:
    """A version's primary metric: its tag, else its run's (NaN only when neither has it)."""
    tagged = store.rows("SELECT value FROM model_version_tags WHERE name = ? AND version = ? AND key = ?",
                        (name, int(version), metric), "model_version_tags")
    try:
        score = float(tagged[0][0]) if tagged else float("nan")
    except ValueError:
        score = float("nan")
    if not math.isfinite(score):
        score = float(store.run_values("latest_metrics", run_id).get(metric, float("nan")))
    return score


def _version(store: _Store, name: str, version: str) -> tuple:
    try:
        number = int(version)
    except ValueError:
        number = None
    found = store.rows("SELECT version, run_id, creation_time FROM model_versions WHERE name = ? AND version = ? "
                       "AND current_stage != ?", (name, number, DELETED), "model_versions") if number else []
    if not found:
        raise JobawareError(f"{name} has no version {version}")
    return found[0]


# ---------------------------------------------------------------- what the commands read
def list_models() -> list[dict]:
    """Every registered version of every capability, with aliases and the primary metric."""
    if (store := _store()) is None:
        from jobaware import tracking

        return tracking.list_models()
    rows = []
    for capability in capabilities.registry().values():
        name = capability.model_name
        aliases = _aliases(store, name)
        for version, run_id, created in _versions(store, name):
            rows.append({"model": name, "version": str(version),
                         "aliases": ",".join(sorted(a for a, v in aliases.items() if v == str(version))),
                         "metric": capability.primary_metric,
                         "score": _score(store, name, version, run_id, capability.primary_metric),
                         "run_id": run_id, "created": _when(created)})
    return sorted(rows, key=lambda r: (r["model"], int(r["version"])))


def champion_version(key: str) -> str | None:
    if (store := _store()) is None:
        from jobaware import tracking

        return tracking.champion_version(key)
    return _aliases(store, capabilities.get(key).model_name).get("champion")


def _artifact_json(store: _Store, run_id: str, path: str) -> dict | None:
    local = store.artifact(run_id, path)
    if local is None:
        return None
    return json.loads(local.read_text()) if local.is_file() else {}


def version_metrics(key: str, version: str) -> dict:
    """The metrics document (`metrics/all.json`) of the run behind a registered version."""
    if (store := _store()) is None:
        from jobaware import tracking

        return tracking.version_metrics(key, version)
    _, run_id, _ = _version(store, capabilities.get(key).model_name, version)
    found = _artifact_json(store, run_id, METRICS)
    if found is None:  # artifacts not in a local folder
        from jobaware import tracking

        return tracking.version_metrics(key, version)
    if not found:
        raise JobawareError(f"the metrics of version {version}: no {METRICS} in run {run_id}")
    return found


def training_profile(key: str, version: str) -> dict | None:
    """What a registered version was trained on (`fit/profile.json` of its run), None for a run without it."""
    if (store := _store()) is None:
        from jobaware import tracking

        return tracking.training_profile(key, version)
    _, run_id, _ = _version(store, capabilities.get(key).model_name, version)
    found = _artifact_json(store, run_id, PROFILE)
    if found is None:  # artifacts not in a local folder
        from jobaware import tracking

        return tracking.training_profile(key, version)
    return found or None


def _experiment(store: _Store, key: str) -> str | None:
    found = store.rows("SELECT experiment_id FROM experiments WHERE name = ?",
                       (capabilities.get(key).experiment_name,), "experiments")
    return str(found[0][0]) if found else None


def _actions(store: _Store, experiment: str) -> list[tuple]:
    """The runs of an experiment that record a jobaware action (promotions, rollbacks), oldest first."""
    return store.rows("SELECT r.run_uuid, r.start_time, t.value FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
                      "WHERE r.experiment_id = ? AND r.lifecycle_stage = 'active' AND t.key = 'jobaware.action' "
                      "AND t.value != '' ORDER BY r.start_time, r.run_uuid LIMIT 1000", (int(experiment),))


def describe_version(key: str, version: str) -> dict:
    """`jobaware models show`: as `jobaware.tracking.describe_version`."""
    if (store := _store()) is None:
        from jobaware import tracking

        return tracking.describe_version(key, version)
    capability = capabilities.get(key)
    name = capability.model_name
    number, run_id, created = _version(store, name, version)
    params = store.run_values("params", run_id)
    tags = store.run_values("tags", run_id)
    profile = training_profile(key, version) or {}
    gate = []
    experiment = _experiment(store, key)
    for action_run, started, action in _actions(store, experiment) if experiment else []:
        action_params, metrics = store.run_values("params", action_run), store.run_values("latest_metrics", action_run)
        if str(version) not in (action_params.get("candidate"), action_params.get("to_version"),
                                action_params.get("from_version")):
            continue
        gate.append({"when": _when(started), "action": action,
                     "promoted": bool(metrics.get("promoted", 0.0)) if "promoted" in metrics else None,
                     "forced": action_params.get("forced"), "candidate_score": metrics.get("candidate_score"),
                     "champion_score": metrics.get("champion_score"),
                     "detail": action_params.get("reason")
                     or f"{action_params.get('from_version')} -> {action_params.get('to_version')}"})
    try:
        metrics = version_metrics(key, version)
    except JobawareError:
        metrics = {}
    return {
        "model": name, "version": str(version), "run_id": run_id,
        "aliases": sorted(a for a, v in _aliases(store, name).items() if v == str(number)),
        "metric": capability.primary_metric, "score": _score(store, name, number, run_id, capability.primary_metric),
        "created": _when(created),
        "trained_on": {"data": params.get("data"), "kind": profile.get("kind", "unknown"),
                       "tables": {t: v["rows"] for t, v in profile.get("tables", {}).items()},
                       "feature_version": tags.get(FEATURE_TAG)},
        "params": {k: v for k, v in sorted(params.items()) if k != "data"},
        "metrics": metrics, "gate": gate,
    }


def last_promotion(key: str, version: str) -> dict | None:
    """The newest gate decision logged for `version` (its params: candidate, reason, forced), or None."""
    if (store := _store()) is None:
        from jobaware import gate

        return gate.last_promotion(key, version)
    experiment = _experiment(store, key)
    newest = None
    for run_id, _, action in _actions(store, experiment) if experiment else []:
        params = store.run_values("params", run_id)
        if action == "promote" and params.get("candidate") == str(version):
            newest = params
    return newest


def list_runs(keys: list[str], limit: int = 20) -> list[dict]:
    """The newest runs (training, promotions, rollbacks, sweeps) of the capabilities' experiments; each row names
    its capability's primary metric and its value."""
    if (store := _store()) is None:
        from jobaware import tracking

        return tracking.list_runs(keys, limit)
    experiments = {experiment: key for key in keys if (experiment := _experiment(store, key)) is not None}
    if not experiments:
        return []
    marks = ",".join("?" * len(experiments))
    runs = store.rows(f"SELECT run_uuid, status, start_time, experiment_id FROM runs WHERE experiment_id IN ({marks}) "
                      "AND lifecycle_stage = 'active' ORDER BY start_time DESC, run_uuid LIMIT ?",
                      (*map(int, experiments), limit))
    rows = []
    for run_id, status, started, experiment in runs:
        key = experiments[str(experiment)]
        metric = capabilities.get(key).primary_metric
        tags, params = store.run_values("tags", run_id), store.run_values("params", run_id)
        rows.append({"run_id": run_id, "capability": key,
                     "kind": tags.get("jobaware.action") or ("sweep" if SWEEP_TAG in tags else "training"),
                     "started": _when(started), "status": status, "metric": metric,
                     "score": store.run_values("latest_metrics", run_id).get(metric, float("nan")),
                     "data": params.get("data", "")})
    return rows


def describe_run(run_id: str) -> dict:
    """`jobaware runs show`: as `jobaware.tracking.describe_run`."""
    if (store := _store()) is None:
        from jobaware import tracking

        return tracking.describe_run(run_id)
    run = store.run(run_id)
    if run is None:
        raise JobawareError(f"no run {run_id!r} in {config.tracking_uri(create=False)}")
    _, name, status, started, artifact_uri, experiment = run
    folder = _local(artifact_uri)
    if folder is None:  # artifacts not in a local folder
        from jobaware import tracking

        return tracking.describe_run(run_id)
    found = store.rows("SELECT name FROM experiments WHERE experiment_id = ?", (experiment,), "experiments")
    return {"run_id": run_id, "experiment": found[0][0] if found else None, "name": name, "status": status,
            "started": _when(started), "params": dict(sorted(store.run_values("params", run_id).items())),
            "metrics": dict(sorted(store.run_values("latest_metrics", run_id).items())),
            "tags": {k: v for k, v in sorted(store.run_values("tags", run_id).items()) if k.startswith("jobaware.")},
            "artifacts": sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []}
