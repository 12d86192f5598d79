"""MLflow conventions: experiment and registered model `jobaware-<key>`, aliases challenger and champion.

Run logging (training runs, models, evaluations, sweeps), registering, and reading the registry; the
promotion gate and rollback live in `jobaware.gate`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import math
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import joblib
import mlflow.pyfunc
import pandas as pd
from mlflow.types.type_hints import TypeFromExample

from jobaware import capabilities, config, fit, sources
from jobaware.errors import JobawareError
from jobaware.jsonable import jsonable
from jobaware.model import Bundle, Evaluation
from jobaware.text import redacted

MODEL_URI_TAG = "jobaware.model_uri"
FEATURE_TAG = "jobaware.feature_version"
TRAINED_ON_TAG = "jobaware.trained_on"  # the data's kind and tables; `.bundle`: a bundle's own `trained_on`, as JSON
EVAL_TAG = "jobaware.eval_sha256"
MODEL_DIGEST_TAG = "jobaware.model_sha256"  # SHA-256 of a model's files (`model_digest`): on its run, then its version
REGISTERED_MODEL_META = "registered_model_meta"  # written by MLflow's download of `models:/...` on the caller's side
EVAL_DIR = "eval"
OPERATING_TAG = "jobaware.operating."  # + objective, threshold, ...: copied from the run onto its registered version
PROFILE = "fit/profile.json"
PIPELINE_RUN_TAG = "jobaware.pipeline_run"  # on every MLflow run those steps open: `end_unfinished` finds them

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
logging.getLogger("mlflow").setLevel(logging.ERROR)


class RegistryError(JobawareError):
    """The tracking server or registry could not be read or written; nothing was changed."""


class IntegrityError(JobawareError):
    """A model version's files are not the ones recorded when it was logged (or no digest was recorded): they are
    never deserialised, and no gate, not even a forced one, promotes the version."""


def mlflow_client(create: bool = False):
    """The mlflow module and a client on the configured store.

    Commands that only read pass `create=False`: a missing local store is an error naming its path,
    never a new empty store.
    """
    import mlflow

    uri = config.tracking_uri(create=create)
    config.reach(uri)  # a person's command: one line within seconds when the server does not answer
    store = config.local_registry(uri)
    if store is not None and not create and not store.is_file():
        raise JobawareError(f"no MLflow store at {store} (JOBAWARE_HOME={config.home(create=False)}); "
                            "run a pipeline first, or set JOBAWARE_HOME or MLFLOW_TRACKING_URI to the store you use")
    saved = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    # MLflow exports the URI into the environment; keep ours as it was, so JOBAWARE_HOME stays in charge
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    return mlflow, mlflow.MlflowClient(uri, uri)


def experiment_id(key: str) -> str:
    _, client = mlflow_client(create=True)
    name = capabilities.get(key).experiment_name
    found = client.get_experiment_by_name(name)
    if found:
        return found.experiment_id
    uri = config.tracking_uri()
    local = config.local_store(uri) is not None
    return client.create_experiment(name, artifact_location=f"{config.artifact_root(uri)}/{name}" if local else None)


def run_tags(**tags: str) -> dict[str, str]:
    """`tags`, and the pipeline run this process is a step of (PIPELINE_RUN_TAG), where it is one."""
    if pipeline_run := os.environ.get(config.PIPELINE_RUN_ENV):
        tags[PIPELINE_RUN_TAG] = pipeline_run
    return tags


def end_unfinished(pipeline_run: str, status: str) -> int:
    """Mark the MLflow runs a pipeline run's steps left RUNNING (a step killed, the pipeline stopped by Ctrl-C or
    SIGTERM) with `status` (KILLED or FAILED), so that none stays RUNNING for ever; how many."""
    store = config.local_store(config.tracking_uri(create=False))
    if store is not None and not store.is_file():
        return 0  # stopped before any run was opened
    _, client = mlflow_client()
    experiments = [e.experiment_id for e in registry_call(lambda: client.search_experiments(
        filter_string="name LIKE 'jobaware-%'"), "the experiments")]
    if not experiments:
        return 0
    left = registry_call(lambda: client.search_runs(
        experiments, f"tags.`{PIPELINE_RUN_TAG}` = '{pipeline_run}' and attributes.status = 'RUNNING'",
        max_results=1000), f"the runs of pipeline run {pipeline_run}")
    for run in left:
        registry_call(lambda run=run: client.set_terminated(run.info.run_id, status), f"run {run.info.run_id}")
    return len(left)


class BundleModel(mlflow.pyfunc.PythonModel):
    """MLflow pyfunc over a capability's bundle, stored with joblib (the explicit serialization format)."""

    def load_context(self, context):
        self.bundle = joblib.load(context.artifacts["bundle"])

    def predict(self, context, model_input: TypeFromExample, params=None):
        return self.bundle.predict(pd.DataFrame(model_input))


def start_run(key: str, params: dict, validation: dict | None = None, quarantine: str | Path | None = None,
              dataset: str | Path | None = None) -> str:
    """Open a training run: parameters, the validation report (contract and bad records), the quarantine, and
    what the model is trained on (`fit/profile.json` and the tag `jobaware.trained_on`, from the canonical
    `dataset` folder and the sources in `params["data"]`)."""
    mlflow, _ = mlflow_client(create=True)
    validation = validation or {}
    with mlflow.start_run(experiment_id=experiment_id(key), tags=run_tags()) as run:
        params = {k: redacted(v) if isinstance(v, str) else v for k, v in params.items()}  # a source URI's password
        mlflow.log_params({k: v if len(str(v)) < 500 else str(v)[:497] + "..." for k, v in params.items()})
        mlflow.set_tag(FEATURE_TAG, capabilities.get(key).feature_version)
        mlflow.log_dict(validation, "contract/result.json")
        mlflow.log_metric("contract_success", float(bool(validation.get("success", False))))
        read = validation.get("read") or {}
        if "bad_rows" in read:
            mlflow.log_metrics({"bad_records": float(read["bad_rows"]), "read_records": float(read.get("rows", 0))})
        if quarantine and Path(quarantine).is_file() and Path(quarantine).stat().st_size:
            mlflow.log_artifact(str(quarantine), "contract")
        if dataset is not None:
            trained_on = fit.profile(dataset, sources.parse(params["data"]) if params.get("data") else [])
            mlflow.log_dict(trained_on, PROFILE)
            mlflow.set_tag(TRAINED_ON_TAG, f"{trained_on['kind']} {', '.join(trained_on['tables'])}")
        return run.info.run_id


def training_profile(key: str, version: str) -> dict | None:
    """What a registered version was trained on (`fit/profile.json` of its run), None for a run without it."""
    _, client = mlflow_client()
    run_id = model_version(client, capabilities.get(key).model_name, version).run_id
    if not any(a.path == PROFILE for a in client.list_artifacts(run_id, Path(PROFILE).parent.as_posix())):
        return None
    return json.loads(Path(client.download_artifacts(run_id, PROFILE)).read_text())


def log_model(run_id: str, key: str, bundle: Bundle) -> str:
    """Log the bundle as a pyfunc model with the capability's signature and input example; return its URI."""
    mlflow, _ = mlflow_client(create=True)
    capability = capabilities.get(key)
    with mlflow.start_run(run_id=run_id), tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bundle.joblib"
        joblib.dump(bundle, path)
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=BundleModel(),
            artifacts={"bundle": str(path)},
            signature=capability.signature(),
            input_example=capability.input_example(bundle),
            metadata={"serialization_format": "joblib", "capability": key,
                      "feature_version": capability.feature_version},
            pip_requirements=[f"jobaware=={__import__('jobaware').__version__}"],
        )
        mlflow.set_tag(MODEL_URI_TAG, info.model_uri)
        mlflow.set_tag(MODEL_DIGEST_TAG, _stored_digest(mlflow, info.model_uri, f"the model of run {run_id}"))
        if bundle.trained_on:
            mlflow.set_tag(f"{TRAINED_ON_TAG}.bundle", json.dumps(bundle.trained_on, sort_keys=True))
    return info.model_uri


def log_operating(run_id: str, operating: dict) -> None:
    """The operating point a model acts on (objective, threshold, validation figures): run tags
    `jobaware.operating.<name>` (a number in its exact shortest form, "none" for no threshold), which `register`
    copies onto the version, and the numbers as metrics."""
    mlflow, _ = mlflow_client(create=True)
    with mlflow.start_run(run_id=run_id):
        mlflow.set_tags({f"{OPERATING_TAG}{k}": "none" if v is None else str(v) for k, v in operating.items()})
        mlflow.log_metrics({k if k.startswith("validation_") else f"operating_{k}": float(v)
                            for k, v in operating.items()
                            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)})


def model_digest(folder: Path) -> str:
    """SHA-256 over every file of a model's folder, in the order of their paths (each: its path relative to the
    folder, its size, its bytes), so that a file changed, added, removed or renamed changes it; MLflow's
    `registered_model_meta`, which its download writes (the name and version asked for), aside. Anything there but
    plain files and folders (a link, a device) is an IntegrityError."""
    digest = hashlib.sha256()
    entries = sorted(folder.rglob("*"), key=lambda p: p.relative_to(folder).as_posix())
    for path in entries:
        if path.parent == folder and path.name == REGISTERED_MODEL_META:
            continue
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise IntegrityError(f"{path}: not a plain file in a model's folder; not loaded")
        if path.is_dir():
            continue
        relative = path.relative_to(folder).as_posix().encode()
        digest.update(b"%d:%s:%d:" % (len(relative), relative, path.stat().st_size))
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):  # noqa: B023 - read here, in this iteration
                digest.update(block)
    return digest.hexdigest()


def _stored_digest(mlflow, uri: str, what: str) -> str:
    """The `model_digest` of the model at `uri` as the artifact store holds it (downloaded to a private folder)."""
    with tempfile.TemporaryDirectory(prefix="jobaware-model-") as tmp:
        local = registry_call(lambda: mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=tmp), what)
        return model_digest(Path(local))


def _folder_sha256(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def log_evaluation(run_id: str, metrics: dict[str, dict], plots: list[Path], eval_dir: Path,
                   documents: dict[str, object] | None = None) -> None:
    """Metrics of the model (`metrics["model"]`) and of each baseline, plots, JSON documents, and the
    evaluation folder the promotion gate re-scores models on."""
    mlflow, _ = mlflow_client(create=True)
    with mlflow.start_run(run_id=run_id):
        for name, values in metrics.items():
            prefix = "" if name == "model" else f"baseline_{name}_"
            mlflow.log_metrics({f"{prefix}{k}": float(v) for k, v in values.items()
                                if isinstance(v, int | float) and not isinstance(v, bool)})
        mlflow.log_dict(jsonable(metrics), "metrics/all.json")
        for name, document in (documents or {}).items():
            mlflow.log_dict(jsonable(document), f"metrics/{name}.json")
        for path in plots:
            mlflow.log_artifact(str(path), "plots")
        mlflow.log_artifacts(str(eval_dir), EVAL_DIR)
        mlflow.set_tag(EVAL_TAG, _folder_sha256(Path(eval_dir)))


def log_training(key: str, params: dict, bundle: Bundle, evaluation: Evaluation, validation: dict | None = None,
                 quarantine: str | Path | None = None, dataset: str | Path | None = None) -> str:
    """One training run, whole: parameters (with the evaluation's `run_params`), validation, quarantine, model,
    operating point, metrics, plots, documents and the gate's evaluation folder; the run id."""
    run_id = start_run(key, {**params, **evaluation.run_params}, validation, quarantine, dataset=dataset)
    log_model(run_id, key, bundle)
    if evaluation.operating:
        log_operating(run_id, evaluation.operating)
    log_evaluation(run_id, evaluation.metrics, evaluation.plots, evaluation.eval_dir, evaluation.documents)
    return run_id


def model_uri(run_id: str) -> str:
    """The URI of the model logged in a run."""
    _, client = mlflow_client()
    uri = registry_call(lambda: client.get_run(run_id), f"run {run_id}").data.tags.get(MODEL_URI_TAG)
    if not uri:
        raise JobawareError(f"run {run_id} logged no model")
    return uri


def registry_call(call, what: str):
    """Run a registry call; any failure becomes a RegistryError that names what was being read."""
    from mlflow.exceptions import MlflowException

    try:
        return call()
    except MlflowException as exc:
        raise RegistryError(f"the registry could not answer for {what}: {exc.message.splitlines()[0][:300]}") from None
    except Exception as exc:  # noqa: BLE001 - connection errors, locked stores, ...
        raise RegistryError(f"the registry could not answer for {what}: {type(exc).__name__}: {str(exc)[:300]}") from None


LOCK_SECONDS = 1800.0  # how long a promotion, rollback or registration waits for another one of the same model


@contextlib.contextmanager
def registry_lock(key: str) -> Iterator[None]:
    """Promotions, rollbacks and registrations of one model, one at a time: on the embedded store, an exclusive
    `flock` on a file beside it (`.mlflow.db.jobaware-<key>.lock`), waited for up to LOCK_SECONDS and freed when the
    process ends, however it ends. A tracking server offers no lock: there `jobaware.gate` re-reads the champion
    right before moving it instead (see its docstring for what that leaves)."""
    store = config.local_store(config.tracking_uri(create=False))
    if store is None:
        yield
        return
    path = store.with_name(f".{store.name}.{capabilities.get(key).model_name}.lock")
    try:
        handle = open(path, "a")
    except OSError as exc:
        raise RegistryError(f"{path}: cannot open the registry lock ({exc.strerror or exc})") from None
    with handle:
        deadline = time.monotonic() + LOCK_SECONDS
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RegistryError(f"{path}: another promotion, rollback or registration of "
                                        f"{capabilities.get(key).model_name} held the registry lock for "
                                        f"{LOCK_SECONDS:.0f} s; nothing was changed") from None
                time.sleep(0.1)
        yield


def register(key: str, run_id: str) -> str:
    """Register the run's model as a new version of `jobaware-<key>` (tagged with its primary metric, feature
    version and operating point) and point `challenger` at it, unless a newer version is the challenger already
    (two pipelines that register at once leave the newest one there)."""
    mlflow_client(create=True)  # the store (and its folder, where the lock goes) first
    with registry_lock(key):
        return _register(key, run_id)


def _register(key: str, run_id: str) -> str:
    mlflow, client = mlflow_client(create=True)
    capability = capabilities.get(key)
    name = capability.model_name
    version = mlflow.register_model(model_uri(run_id), name)
    logged = client.get_run(run_id).data.tags.get(MODEL_DIGEST_TAG)
    if logged is not None:  # a run logged before digests were recorded: its version has none (`models verify`)
        stored = _stored_digest(mlflow, f"models:/{name}/{version.version}", f"{name} version {version.version}")
        if stored != logged:
            raise IntegrityError(f"{name} version {version.version}: its files changed since run {run_id} logged "
                                 "them; it is registered without a digest and will not be loaded")
        client.set_model_version_tag(name, version.version, MODEL_DIGEST_TAG, logged)
    metric = capability.primary_metric
    primary = client.get_run(run_id).data.metrics.get(metric, float("nan"))
    client.set_model_version_tag(name, version.version, metric, f"{primary:.6f}")
    client.set_model_version_tag(name, version.version, FEATURE_TAG, capability.feature_version)
    run_tags = client.get_run(run_id).data.tags
    for tag, value in run_tags.items():
        if tag.startswith((OPERATING_TAG, TRAINED_ON_TAG)):
            client.set_model_version_tag(name, version.version, tag, value)
    challenger = alias_version(client, name, "challenger")
    if challenger is None or int(challenger) < int(version.version):
        client.set_registered_model_alias(name, "challenger", version.version)
    return str(version.version)


def _is_missing(exc) -> bool:
    """True only for the registry's answer "no such alias / model"."""
    code = getattr(exc, "error_code", "")
    message = str(getattr(exc, "message", exc)).lower()
    return code == "RESOURCE_DOES_NOT_EXIST" or (code == "INVALID_PARAMETER_VALUE" and "alias" in message
                                                 and "not found" in message)


def alias_version(client, name: str, alias: str) -> str | None:
    """The version an alias points to; None only when the alias (or the model) does not exist."""
    from mlflow.exceptions import MlflowException

    try:
        return str(client.get_model_version_by_alias(name, alias).version)
    except MlflowException as exc:
        if _is_missing(exc):
            return None
        raise RegistryError(f"could not read alias '{alias}' of {name}: {exc.message.splitlines()[0][:300]}") from None
    except Exception as exc:  # noqa: BLE001
        raise RegistryError(f"could not read alias '{alias}' of {name}: {type(exc).__name__}: {str(exc)[:300]}") from None


def model_version(client, name: str, version: str):
    """A registered version; a JobawareError when there is no such version, a RegistryError when unreadable."""
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version(name, version)
    except MlflowException as exc:
        if _is_missing(exc):
            raise JobawareError(f"{name} has no version {version}") from None
        raise RegistryError(f"could not read version {version} of {name}: {exc.message.splitlines()[0][:300]}") from None


def load_bundle(key: str, version: str | None = None, alias: str = "champion") -> tuple[Bundle, str]:
    """The bundle of a registered version (or of the version an alias points to), and that version.

    Its files are downloaded to a private folder and their digest (`model_digest`) checked against the one recorded
    on the version before anything in them is deserialised: a file swapped in the artifact store (a planted pickle)
    or a version without a digest is an IntegrityError, and nothing of it runs. A bundle trained with other feature
    code than this jobaware's is refused: it would be fed features it was not trained on.
    """
    mlflow, client = mlflow_client()
    capability = capabilities.get(key)
    name = capability.model_name
    version = version or alias_version(client, name, alias)
    if version is None:
        raise JobawareError(f"no model version of {name} has alias '{alias}'; run `jobaware pipeline run {key}` first")
    recorded = model_version(client, name, version).tags.get(MODEL_DIGEST_TAG)
    if not recorded:
        raise IntegrityError(f"{name} version {version}: no digest of its files was recorded (registered before "
                             f"jobaware recorded them); not loaded. Check its files, then record it: `jobaware models "
                             f"verify {key} {version} --record`")
    with tempfile.TemporaryDirectory(prefix="jobaware-model-") as tmp:
        local = Path(registry_call(lambda: mlflow.artifacts.download_artifacts(
            artifact_uri=f"models:/{name}/{version}", dst_path=tmp), f"{name} version {version}"))
        if model_digest(local) != recorded:
            raise IntegrityError(f"{name} version {version}: its files do not match the digest recorded at "
                                 "promotion; not loaded")
        model = registry_call(lambda: mlflow.pyfunc.load_model(str(local)), f"{name} version {version}")
    bundle = model.unwrap_python_model().bundle
    trained_with = bundle.feature_version
    if trained_with != capability.feature_version:
        raise JobawareError(f"{name} version {version} was trained with feature code {trained_with}; this jobaware "
                            f"computes features with version {capability.feature_version}: retrain it")
    return bundle, str(version)


def verify(key: str, version: str, record: bool = False) -> dict:
    """`jobaware models verify`: whether a version's files match the digest recorded for them; with `record`, record
    the digest of its files as they are now on a version that has none (a person's act, after checking them; logged
    as an MLflow run). A recorded digest is never replaced: files that do not match it are restored, or retrained."""
    mlflow, client = mlflow_client()
    name = capabilities.get(key).model_name
    with registry_lock(key):
        recorded = model_version(client, name, version).tags.get(MODEL_DIGEST_TAG)
        found = _stored_digest(mlflow, f"models:/{name}/{version}", f"{name} version {version}")
        if recorded and found != recorded:
            raise IntegrityError(f"{name} version {version}: its files do not match the digest recorded at "
                                 "promotion; not loaded. Restore them, or retrain (a recorded digest is never "
                                 "replaced)")
        if not recorded and not record:
            raise IntegrityError(f"{name} version {version}: no digest of its files was recorded; check them, then "
                                 f"record it: `jobaware models verify {key} {version} --record`")
        if not recorded:
            registry_call(lambda: client.set_model_version_tag(name, version, MODEL_DIGEST_TAG, found),
                          f"{name} version {version}")
            with mlflow.start_run(experiment_id=experiment_id(key), run_name="record-digest",
                                  tags=run_tags(**{"jobaware.action": "record-digest"})):
                mlflow.log_params({"candidate": str(version), "reason": f"digest recorded by a person: {found}"})
    return {"model": name, "version": str(version), "sha256": found,
            "state": "recorded" if not recorded else "matches the digest recorded at promotion"}


def list_models() -> list[dict]:
    """Every registered version of every capability, with aliases and the primary metric."""
    _, client = mlflow_client()
    rows = []
    for capability in capabilities.registry().values():
        name = capability.model_name
        versions = registry_call(lambda: client.search_model_versions(f"name='{name}'"), name)  # noqa: B023
        if not versions:
            continue
        aliases = registry_call(lambda: client.get_registered_model(name), name).aliases  # noqa: B023
        for version in versions:
            rows.append({
                "model": name,
                "version": str(version.version),
                "aliases": ",".join(sorted(a for a, v in aliases.items() if str(v) == str(version.version))),
                "metric": capability.primary_metric,
                "score": version_score(client, version, capability.primary_metric),
                "run_id": version.run_id,
                "created": pd.Timestamp(version.creation_timestamp, unit="ms").strftime("%Y-%m-%d %H:%M:%S"),
            })
    return sorted(rows, key=lambda r: (r["model"], int(r["version"])))


def version_score(client, version, metric: str) -> float:
    """A version's primary metric: its tag, else the metric of its run (a number; NaN only when neither has it)."""
    try:
        score = float(version.tags.get(metric, "nan"))
    except ValueError:
        score = float("nan")
    if not math.isfinite(score):
        run = registry_call(lambda: client.get_run(version.run_id), f"the run of version {version.version}")
        score = float(run.data.metrics.get(metric, float("nan")))
    return score


def version_metrics(key: str, version: str) -> dict:
    """The metrics document (`metrics/all.json`) of the run behind a registered version."""
    _, client = mlflow_client()
    run_id = model_version(client, capabilities.get(key).model_name, version).run_id
    path = registry_call(lambda: client.download_artifacts(run_id, "metrics/all.json"), f"the metrics of version {version}")
    return json.loads(Path(path).read_text())


def version_facts(key: str, version: str) -> dict:
    """What the services show of the version they serve: when it was registered (Unix time), and its registered
    evaluation (the primary metric's name and score, NaN when unrecorded, and whether higher is better)."""
    _, client = mlflow_client()
    capability = capabilities.get(key)
    found = model_version(client, capability.model_name, version)
    return {"created": found.creation_timestamp / 1000, "metric": capability.primary_metric,
            "score": version_score(client, found, capability.primary_metric),
            "higher_is_better": capability.higher_is_better}


def champion_version(key: str) -> str | None:
    _, client = mlflow_client()
    return alias_version(client, capabilities.get(key).model_name, "champion")



# ---------------------------------------------------------------- sweeps
SWEEP_TAG = "jobaware.sweep_run_id"


def open_sweep(key: str, space: dict, trials: list[dict]) -> str:
    """A parent run for a hyper-parameter sweep (left running until `close_sweep`); returns its id."""
    _, client = mlflow_client(create=True)
    run = client.create_run(experiment_id(key), run_name="sweep", tags=run_tags(**{"jobaware.action": "sweep"}))
    client.log_param(run.info.run_id, "trials", len(trials))
    client.log_dict(run.info.run_id, {"space": jsonable(space), "trials": jsonable(trials)}, "sweep/space.json")
    return run.info.run_id


def log_trial(key: str, sweep_run: str, number: int, params: dict, metrics: dict[str, float]) -> str:
    """One trial as a run nested under its sweep: its parameters and (finite) metrics; returns its id."""
    from mlflow.entities import Metric, Param
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    _, client = mlflow_client(create=True)
    run = client.create_run(experiment_id(key), run_name=f"trial-{number}",
                            tags=run_tags(**{MLFLOW_PARENT_RUN_ID: sweep_run, "jobaware.action": "trial",
                                             "jobaware.trial": str(number)}))
    now = int(pd.Timestamp.now(tz="UTC").timestamp() * 1000)
    client.log_batch(run.info.run_id,
                     params=[Param(k, str(v)[:500]) for k, v in params.items()],
                     metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()
                              if isinstance(v, int | float) and math.isfinite(v)])
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def close_sweep(sweep_run: str, best: int, best_params: dict, best_metric: float) -> None:
    """Record the chosen trial on the sweep's run and end it."""
    _, client = mlflow_client(create=True)
    client.log_param(sweep_run, "best_trial", best)
    client.log_dict(sweep_run, jsonable(best_params), "sweep/best_params.json")
    if math.isfinite(best_metric):
        client.log_metric(sweep_run, "best_validation_primary", best_metric)
    client.set_terminated(sweep_run)


# ---------------------------------------------------------------- reading the registry and the runs
def describe_version(key: str, version: str) -> dict:
    """`jobaware models show`: a version's aliases and score, the data it was trained on, its parameters,
    every baseline's metrics and its gate history (every promotion decision on it, and rollbacks)."""
    _, client = mlflow_client()
    capability = capabilities.get(key)
    name = capability.model_name
    found = model_version(client, name, version)
    run = registry_call(lambda: client.get_run(found.run_id), f"the run of version {version}")
    aliases = registry_call(lambda: client.get_registered_model(name), name).aliases
    profile = training_profile(key, version) or {}
    gate = []
    experiment = client.get_experiment_by_name(capability.experiment_name)
    actions = registry_call(lambda: client.search_runs(
        [experiment.experiment_id], "tags.`jobaware.action` != ''", order_by=["attributes.start_time ASC"],
        max_results=1000), f"the gate history of {name}") if experiment else []
    for action in actions:
        params, metrics = action.data.params, action.data.metrics
        if version not in (params.get("candidate"), params.get("to_version"), params.get("from_version")):
            continue
        gate.append({"when": pd.Timestamp(action.info.start_time, unit="ms").strftime("%Y-%m-%d %H:%M:%S"),
                     "action": action.data.tags.get("jobaware.action"),
                     "promoted": bool(metrics.get("promoted", 0.0)) if "promoted" in metrics else None,
                     "forced": params.get("forced"), "candidate_score": metrics.get("candidate_score"),
                     "champion_score": metrics.get("champion_score"),
                     "detail": params.get("reason") or f"{params.get('from_version')} -> {params.get('to_version')}"})
    try:
        metrics = version_metrics(key, version)
    except JobawareError:
        metrics = {}
    return {
        "model": name, "version": str(version), "run_id": found.run_id,
        "aliases": sorted(a for a, v in aliases.items() if str(v) == str(version)),
        "metric": capability.primary_metric, "score": version_score(client, found, capability.primary_metric),
        "created": pd.Timestamp(found.creation_timestamp, unit="ms").strftime("%Y-%m-%d %H:%M:%S"),
        "trained_on": {"data": run.data.params.get("data"), "kind": profile.get("kind", "unknown"),
                       "tables": {t: v["rows"] for t, v in profile.get("tables", {}).items()},
                       "feature_version": run.data.tags.get(FEATURE_TAG)},
        "params": {k: v for k, v in sorted(run.data.params.items()) if k != "data"},
        "metrics": metrics, "gate": gate,
    }


def list_runs(keys: list[str], limit: int = 20) -> list[dict]:
    """The newest runs (training, promotions, rollbacks, sweeps) of the capabilities' experiments; each row names
    its capability's primary metric and its value."""
    _, client = mlflow_client()
    experiments = {}
    for key in keys:
        found = client.get_experiment_by_name(capabilities.get(key).experiment_name)
        if found:
            experiments[found.experiment_id] = key
    if not experiments:
        return []
    runs = registry_call(lambda: client.search_runs(list(experiments), order_by=["attributes.start_time DESC"],
                                                     max_results=limit), "the runs")
    rows = []
    for run in runs:
        key = experiments[run.info.experiment_id]
        metric = capabilities.get(key).primary_metric
        rows.append({"run_id": run.info.run_id, "capability": key,
                     "kind": run.data.tags.get("jobaware.action") or ("sweep" if SWEEP_TAG in run.data.tags else "training"),
                     "started": pd.Timestamp(run.info.start_time, unit="ms").strftime("%Y-%m-%d %H:%M:%S"),
                     "status": run.info.status, "metric": metric,
                     "score": run.data.metrics.get(metric, float("nan")),
                     "data": run.data.params.get("data", "")})
    return rows


def describe_run(run_id: str) -> dict:
    """`jobaware runs show`: a run's capability, status, parameters, metrics, jobaware tags and artifacts."""
    from mlflow.exceptions import MlflowException

    _, client = mlflow_client()
    try:
        run = client.get_run(run_id)
    except MlflowException as exc:
        if _is_missing(exc) or "not found" in str(exc).lower():
            raise JobawareError(f"no run {run_id!r} in {config.tracking_uri(create=False)}") from None
        raise RegistryError(f"could not read run {run_id}: {str(exc).splitlines()[0][:300]}") from None
    experiment = client.get_experiment(run.info.experiment_id)
    return {"run_id": run.info.run_id, "experiment": experiment.name, "name": run.info.run_name,
            "status": run.info.status,
            "started": pd.Timestamp(run.info.start_time, unit="ms").strftime("%Y-%m-%d %H:%M:%S"),
            "params": dict(sorted(run.data.params.items())), "metrics": dict(sorted(run.data.metrics.items())),
            "tags": {k: v for k, v in sorted(run.data.tags.items()) if k.startswith("jobaware.")},
            "artifacts": [a.path for a in client.list_artifacts(run.info.run_id)]}
