"""The read-only MLflow user of a tracking server that runs MLflow's own authentication (`mlflow server --app-name
basic-auth`, as k8s/base/mlflow.yaml does): made by the admin, with READ on each registered capability's experiment
and registered model and nothing else, so that the services load models and can register, promote or delete none.

The experiments and registered models are made when missing, so that the grants hold before the first training (a
pipeline's register step then adds versions to the model made here). Run again, it sets the user's password and
the grants anew. `python -m jobaware.mlflow_access` is the Kubernetes Job `mlflow-access`: the admin from
MLFLOW_TRACKING_URI, MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, the reader from
JOBAWARE_MLFLOW_READER_USERNAME and JOBAWARE_MLFLOW_READER_PASSWORD.
"""

from __future__ import annotations

import os
import sys
import time

from jobaware import capabilities
from jobaware.errors import JobawareError

READ = "READ"


def grant_reader(tracking_uri: str, username: str, password: str) -> list[str]:
    """Create `username` (or set its password) and grant it READ on every capability's experiment and registered
    model; return what was granted. The caller is the admin (MLflow reads the admin's user from the environment)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException
    from mlflow.server import get_app_client

    if username == os.environ.get("MLFLOW_TRACKING_USERNAME"):
        raise JobawareError(f"the services' MLflow user '{username}' is the admin: give them a user of their own")
    auth = get_app_client("basic-auth", tracking_uri=tracking_uri)
    client = MlflowClient(tracking_uri, tracking_uri)
    try:
        user = auth.get_user(username)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        auth.create_user(username, password)
    else:
        if user.is_admin:
            raise JobawareError(f"the MLflow user '{username}' is an admin: the services' user may only read")
        auth.update_user_password(username, password)
    granted = []
    for capability in capabilities.registry().values():
        experiment = client.get_experiment_by_name(capability.experiment_name)
        experiment_id = experiment.experiment_id if experiment else client.create_experiment(capability.experiment_name)
        try:
            client.get_registered_model(capability.model_name)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise
            client.create_registered_model(capability.model_name)
        grant_read(auth, username, "experiment", experiment_id)
        grant_read(auth, username, "registered_model", capability.model_name)
        granted += [f"experiment {capability.experiment_name}", f"registered model {capability.model_name}"]
    return granted


def grant_read(auth, username: str, resource_type: str, resource_id: str) -> None:
    """Make `username`'s permission on the resource READ: granted when it has none, put back to READ when it has
    another (a wider grant made by hand is narrowed)."""
    from mlflow.exceptions import MlflowException

    try:
        auth.grant_user_permission(username, resource_type, resource_id, READ)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        if auth.get_user_permission(username, resource_type, resource_id).permission != READ:
            auth.revoke_user_permission(username, resource_type, resource_id)
            auth.grant_user_permission(username, resource_type, resource_id, READ)


def wait_for_server(tracking_uri: str, seconds: float) -> None:
    """Wait, at most `seconds`, until the tracking server answers its health check."""
    import httpx

    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(f"{tracking_uri.rstrip('/')}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise JobawareError(f"the MLflow server at {tracking_uri} did not answer its health check in {seconds:.0f} s")
        time.sleep(2)


def main() -> int:
    names = ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD",
             "JOBAWARE_MLFLOW_READER_USERNAME", "JOBAWARE_MLFLOW_READER_PASSWORD")
    missing = [name for name in names if not os.environ.get(name)]
    if missing:
        print(f"error: {', '.join(missing)} not set", file=sys.stderr)
        return 2
    uri = os.environ["MLFLOW_TRACKING_URI"]
    reader = os.environ["JOBAWARE_MLFLOW_READER_USERNAME"]
    try:
        wait_for_server(uri, 120)
        granted = grant_reader(uri, reader, os.environ["JOBAWARE_MLFLOW_READER_PASSWORD"])
    except JobawareError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - one line for the Job's log, never a traceback with a request in it
        message = str(getattr(exc, "message", exc)).splitlines()[0][:300]
        print(f"error: MLflow at {uri} refused: {type(exc).__name__}: {message}", file=sys.stderr)
        return 1
    print(f"{reader}: READ on {', '.join(granted)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
