"""Shared fixtures: a private JOBAWARE_HOME per session, small synthetic data, and a trained champion."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from harness.ports import free_port, wait_for  # noqa: F401 - the tests import them from here too

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "jobaware" / "data" / "real"
NREL_CSV = REAL / "nrel" / "eagle_sample_jobs.csv"
NREL_JSON = REAL / "nrel" / "eagle_sample_jobs.json"
KTH = REAL / "swf" / "KTH-SP2-1996-2.1-cln.swf"
CTC = REAL / "swf" / "CTC-SP2-1996-3.1-cln.swf"
THUNDER = REAL / "swf" / "LLNL-Thunder-2007-1.1-cln.swf"
SQUEUE = ROOT / "tests" / "data" / "squeue_22.05.json"

# Tests never touch the user's own store: one private home for the session, tracking into its SQLite.
_SESSION_HOME = tempfile.mkdtemp(prefix="jobaware-test-")
os.environ["JOBAWARE_HOME"] = _SESSION_HOME
os.environ.pop("MLFLOW_TRACKING_URI", None)
os.environ.setdefault("JOBAWARE_RELOAD_SECONDS", "1")


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory) -> tuple[Path, Path]:
    """20,000 synthetic jobs (Parquet) and their truth file."""
    from jobaware.failure.synth import write

    path = tmp_path_factory.mktemp("synth") / "jobs.parquet"
    truth = write(path, 20_000, "parquet", seed=7)
    return path, truth


@pytest.fixture(scope="session")
def champion(synthetic, tmp_path_factory) -> str:
    """A model trained on the synthetic jobs, registered and promoted in the session's registry."""
    from jobaware import gate, tracking
    from jobaware.failure.reader import read_jobs
    from jobaware.failure.train import log_trained, train_in_memory

    jobs, _ = read_jobs(synthetic[0])
    bundle, evaluation = train_in_memory(jobs, {"max_iter": 80})
    run_id = log_trained(bundle, evaluation, {"max_iter": 80}, tmp_path_factory.mktemp("champion"))
    version = tracking.register("failure", run_id)
    assert gate.promote("failure", version)["promoted"]
    return version


@pytest.fixture(scope="session")
def conformance_home(tmp_path_factory) -> Path:
    """The JOBAWARE_HOME of the conformance smoke runs (tests/test_conformance.py), shared with the tests that serve
    their champions (tests/adapters/htcondor, the soak)."""
    return tmp_path_factory.mktemp("conformance-home")


@pytest.fixture
def in_home(conformance_home, monkeypatch) -> Path:
    """The conformance home as this test's JOBAWARE_HOME (tracking into its own store)."""
    monkeypatch.setenv("JOBAWARE_HOME", str(conformance_home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return conformance_home


@pytest.fixture(scope="session")
def failure_service(champion, tmp_path_factory):
    """A real `bentoml serve` of the failure service on loopback, started by `jobaware serve`."""
    import subprocess
    import sys

    port = free_port()
    log = open(tmp_path_factory.mktemp("service") / "serve.log", "wb")
    jobaware = Path(sys.executable).with_name("jobaware")
    process = subprocess.Popen([str(jobaware), "serve", "failure", "--port", str(port)], stdout=log, stderr=log,
                               start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{url}/readyz", 120, process)
        yield url
    finally:
        from harness.ports import stop

        stop(process, 20)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """Debian's `redis-server` on a free loopback port, append-only persistence on; db 0 flushed per test user."""
    import shutil
    import subprocess
    import time

    binary = shutil.which("redis-server")
    if binary is None:
        reason = "redis-server is not installed here; apt-get install redis-server"
        if os.environ.get("JOBAWARE_REQUIRE_SLURM"):
            pytest.fail(reason)
        pytest.skip(reason)
    port, folder = free_port(), tmp_path_factory.mktemp("redis")
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--appendonly", "yes",
                                "--dir", str(folder), "--save", "", "--daemonize", "no"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import redis

        client = redis.Redis(port=port, socket_connect_timeout=1)
        for _ in range(100):  # bounded: 10 s
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        client.close()
        yield f"redis://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(20)


@pytest.fixture
def fresh_redis(redis_url) -> str:
    """The session's Redis, emptied for this test."""
    import redis

    with redis.Redis.from_url(redis_url) as client:
        client.flushdb()
    return redis_url + "/0"


def pytest_collection_modifyitems(items):
    """The container tests last: they reuse the conformance suite's runs, and in CI the image builds meanwhile."""
    items.sort(key=lambda item: item.nodeid.startswith("tests/test_containers.py"))
