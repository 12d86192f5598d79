"""MLflow as k8s/base/mlflow.yaml runs it, for real on loopback: the `basic-auth` app with the manifests' own
basic_auth.ini and `--allowed-hosts`. A request naming the Service's host (`mlflow:5000`, the URL every service uses)
is served, an unlisted host is refused; the pipelines' admin trains, registers and promotes a model; the services'
user, made by `jobaware.mlflow_access` (the Job `mlflow-access`), loads it as a service does and can promote,
register or tag nothing. Needs MLflow's auth extra (Flask-WTF, as `mlflow[auth]` installs it): without it the live
tests skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from harness.ports import free_port, stop, wait_for
from tests.conftest import ROOT

ADMIN, ADMIN_PASSWORD = "jobaware-admin", "admin-password-for-the-test"
READER, READER_PASSWORD = "jobaware-reader", "reader-password-for-the-test"


def manifests() -> tuple[list[str], str]:
    """The MLflow container's command and the basic_auth.ini of k8s/base/mlflow.yaml."""
    documents = {d["kind"]: d for d in yaml.safe_load_all((ROOT / "jobaware" / "k8s" / "base" / "mlflow.yaml").read_text()) if d}
    [container] = documents["Deployment"]["spec"]["template"]["spec"]["containers"]
    return container["command"], documents["ConfigMap"]["data"]["basic_auth.ini"]


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_the_manifests_name_the_service_in_allowed_hosts_which_mlflow_refuses_by_default():
    """MLflow's default host check (no --allowed-hosts) refuses the Host every service sends; the manifests' list
    takes it, in every form the cluster DNS gives the Service."""
    from mlflow.server.security_utils import get_default_allowed_hosts, is_allowed_host_header

    assert not is_allowed_host_header(get_default_allowed_hosts(), "mlflow:5000")
    command, _ = manifests()
    allowed = option(command, "--allowed-hosts").split(",")
    assert "*" not in "".join(allowed)
    for host in ("mlflow:5000", "mlflow.jobaware:5000", "mlflow.jobaware.svc:5000",
                 "mlflow.jobaware.svc.cluster.local:5000"):
        assert is_allowed_host_header(allowed, host), host
    assert not is_allowed_host_header(allowed, "mlflow.attacker.example:5000")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The manifests' MLflow command on a loopback port: its own SQLite stores and artifact folder, the manifests'
    auth settings, and the loopback host added to the manifests' allowed hosts (the clients here reach it there)."""
    pytest.importorskip("flask_wtf", reason="MLflow's basic-auth app needs Flask-WTF (pip install 'mlflow[auth]')")
    folder = tmp_path_factory.mktemp("mlflow-auth")
    command, ini = manifests()
    ini_path = folder / "basic_auth.ini"
    ini_path.write_text(ini.replace("sqlite:////var/lib/mlflow/basic_auth.db", f"sqlite:///{folder}/basic_auth.db"))
    port = free_port()
    values = {"--host": "127.0.0.1", "--port": str(port), "--backend-store-uri": f"sqlite:///{folder}/mlflow.db",
              "--artifacts-destination": str(folder / "artifacts"),
              "--allowed-hosts": f"{option(command, '--allowed-hosts')},127.0.0.1:{port}"}
    args = [values.get(command[i - 1], arg) if i else arg for i, arg in enumerate(command)]
    assert args[:4] == ["mlflow", "server", "--app-name", "basic-auth"]
    env = {**os.environ, "MLFLOW_AUTH_CONFIG_PATH": str(ini_path), "MLFLOW_AUTH_ADMIN_PASSWORD": ADMIN_PASSWORD,
           "MLFLOW_FLASK_SERVER_SECRET_KEY": "a-flask-secret-for-the-test"}
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        env.pop(name, None)
    log = (folder / "server.log").open("w")
    process = subprocess.Popen([str(Path(sys.executable).with_name("mlflow")), *args[1:], "--workers", "1"], env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=folder)
    try:
        wait_for(f"http://127.0.0.1:{port}/health", 180, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)
        log.close()


def as_user(monkeypatch, uri: str, user: str, password: str) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", user)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)


@pytest.mark.slow
def test_the_service_host_is_served_and_others_refused(server):
    search = f"{server}/api/2.0/mlflow/experiments/search?max_results=1"
    admin = (ADMIN, ADMIN_PASSWORD)
    for host in ("mlflow:5000", "mlflow.jobaware.svc.cluster.local:5000"):
        assert httpx.get(search, headers={"Host": host}, auth=admin, timeout=30).status_code == 200, host
    assert httpx.get(search, headers={"Host": "evil.example:5000"}, auth=admin, timeout=30).status_code == 403
    assert httpx.get(search, headers={"Host": "mlflow:5000"}, timeout=30).status_code == 401
    assert httpx.get(search, headers={"Host": "mlflow:5000"}, auth=(ADMIN, "wrong-password-1234"),
                     timeout=30).status_code == 401


@pytest.mark.slow
def test_the_reader_loads_the_champion_and_cannot_promote_while_the_admin_can(server, synthetic, tmp_path,
                                                                              monkeypatch):
    from mlflow import MlflowClient

    from jobaware import gate, mlflow_access, tracking
    from jobaware.failure.reader import read_jobs
    from jobaware.failure.train import log_trained, train_in_memory

    as_user(monkeypatch, server, ADMIN, ADMIN_PASSWORD)
    granted = mlflow_access.grant_reader(server, READER, READER_PASSWORD)
    assert "registered model jobaware-failure" in granted and "experiment jobaware-failure" in granted
    assert mlflow_access.grant_reader(server, READER, READER_PASSWORD) == granted  # run again: the same, no error

    # the pipelines' steps, as the admin: train, register, promote
    jobs, _ = read_jobs(synthetic[0])
    bundle, evaluation = train_in_memory(jobs, {"max_iter": 30})
    run_id = log_trained(bundle, evaluation, {"max_iter": 30}, tmp_path / "trained")
    first = tracking.register("failure", run_id)
    assert gate.promote("failure", first)["promoted"]
    second = tracking.register("failure", run_id)

    # a service, as the reader: it loads the champion the way `jobaware serve` does
    as_user(monkeypatch, server, READER, READER_PASSWORD)
    loaded, version = tracking.load_bundle("failure")
    assert version == first and loaded.feature_version == bundle.feature_version
    client = MlflowClient(server, server)
    with pytest.raises(tracking.RegistryError, match="Permission denied|403"):
        gate.promote("failure", second, force=True)
    for attempt in (lambda: tracking.register("failure", run_id),
                    lambda: client.set_registered_model_alias("jobaware-failure", "champion", second),
                    lambda: client.delete_registered_model_alias("jobaware-failure", "champion"),
                    lambda: client.set_model_version_tag("jobaware-failure", first, "jobaware.sha256", "0" * 64),
                    lambda: client.delete_model_version("jobaware-failure", first)):
        with pytest.raises(Exception, match="Permission denied|403"):
            attempt()
    assert tracking.champion_version("failure") == first

    # the admin may
    as_user(monkeypatch, server, ADMIN, ADMIN_PASSWORD)
    assert gate.promote("failure", second, force=True)["promoted"]
    assert tracking.champion_version("failure") == second


@pytest.mark.slow
def test_the_access_job_says_what_is_missing_and_refuses_the_admin_as_reader(server, monkeypatch):
    from jobaware import mlflow_access
    from jobaware.errors import JobawareError

    as_user(monkeypatch, server, ADMIN, ADMIN_PASSWORD)
    with pytest.raises(JobawareError, match="is the admin"):
        mlflow_access.grant_reader(server, ADMIN, ADMIN_PASSWORD)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD")
    result = subprocess.run([sys.executable, "-m", "jobaware.mlflow_access"], capture_output=True, text=True,
                            env={**os.environ, "JOBAWARE_MLFLOW_READER_USERNAME": READER}, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: MLFLOW_TRACKING_PASSWORD, JOBAWARE_MLFLOW_READER_PASSWORD not set"
