"""What every pipeline shares: how tasks talk to MLflow, and the ingest → validate → train → register →
promote spine every capability trains through."""

from kfp import dsl, kubernetes

from jobaware.components.ingest import ingest
from jobaware.components.promote import promote
from jobaware.components.register import register
from jobaware.components.train import train
from jobaware.components.validate import validate

# On a cluster the steps that talk to MLflow read the tracking URI and MLflow's admin user (they register and promote)
# from this Secret, in the namespace the pipelines run in (k8s/README.md); locally the `tracking_uri` argument
# carries the URI.
TRACKING_SECRET = "jobaware-mlflow"
TRACKING_ENV = {"tracking_uri": "MLFLOW_TRACKING_URI", "username": "MLFLOW_TRACKING_USERNAME",
                "password": "MLFLOW_TRACKING_PASSWORD"}
# The labels of those steps' pods: MLflow's NetworkPolicy (k8s/base/networkpolicies.yaml) lets in these pods alone
# from the pipelines' namespace.
TRACKED_POD_LABELS = {"app.kubernetes.io/part-of": "jobaware", "app.kubernetes.io/component": "pipeline-step"}


def tracked(task):
    """A task that reads or writes MLflow: tracking URI and user from the Secret, its pod labelled as one that MLflow
    lets in; never cached (it has side effects)."""
    kubernetes.use_secret_as_env(task, secret_name=TRACKING_SECRET, secret_key_to_env=TRACKING_ENV, optional=True)
    for key, value in TRACKED_POD_LABELS.items():
        kubernetes.add_pod_label(task, key, value)
    return task.set_caching_options(False)


def uncached(task):
    """Data may change behind the same path or URI: no step is served from a cache."""
    return task.set_caching_options(False)


def read_and_check(key: str, data, bad_record_budget):
    """ingest → validate; returns both tasks (a failed contract or budget stops the run here)."""
    read = uncached(ingest(key=key, data=data))
    checked = uncached(validate(dataset=read.outputs["dataset"], bad_record_budget=bad_record_budget))
    return read, checked


def train_and_publish(key: str, read, checked, params, data, truth, tracking_uri):
    """train (the capability's own fit + evaluate) → register → promote; returns the register task."""
    trained = tracked(train(key=key, dataset=read.outputs["dataset"], validation=checked.outputs["report"],
                            params=params, data=data, truth=truth, tracking_uri=tracking_uri))
    version = tracked(register(key=key, run_id=trained.outputs["Output"], tracking_uri=tracking_uri))
    tracked(promote(key=key, version=version.output, tracking_uri=tracking_uri))
    return version


def one_step_pipeline(key: str, description: str):
    """The pipeline of a capability with no steps of its own: the shared spine alone."""

    @dsl.pipeline(name=f"jobaware-{key}", description=description)
    def pipeline(data: str, params: str = "{}", tracking_uri: str = "", bad_record_budget: float = 0.01,
                 truth: str = "") -> str:
        read, checked = read_and_check(key, data, bad_record_budget)
        return train_and_publish(key, read, checked, params, data, truth, tracking_uri).output

    return pipeline
