"""The registry: a model is loaded only when its files match the digest recorded for them.

The attacker may write the registry's artifact folder (a member of the group that owns it: issue 50 found it
`2770 root:jobaware`, where every service account and `slurm` write) and plants a pickle into the champion's files.
Root's `jobaware predict` and a real `bentoml serve` then download the version, find its digest changed, and never
deserialise it: the marker the pickle writes when it runs is never written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import NREL_CSV, ROOT, free_port

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))
PLANT = """
import pickle, sys
class Payload:
    def __reduce__(self):
        return (exec, ("import os; open(%r, 'w').write('ran as uid %%d' %% os.getuid())" % sys.argv[2],))
with open(sys.argv[1], 'wb') as handle:
    pickle.dump(Payload(), handle)
"""


def jobaware(home: Path, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "JOBAWARE_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([JOBAWARE, *map(str, args)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)


@pytest.fixture(scope="module")
def registry_home(synthetic, open_folder) -> Path:
    """A home any user may pass through, whose registry holds failure's version 1 (champion) and version 2, both of
    one training run (so one set of files)."""
    from jobaware import gate, tracking
    from jobaware.failure.reader import read_jobs
    from jobaware.failure.train import log_trained, train_in_memory

    home = open_folder / "registry-home"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JOBAWARE_HOME", str(home))
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        jobs, _ = read_jobs(synthetic[0])
        bundle, evaluation = train_in_memory(jobs, {"max_iter": 40}, plot_dir=open_folder / "plots")
        run_id = log_trained(bundle, evaluation, {"max_iter": 40}, open_folder / "train")
        assert tracking.register("failure", run_id) == "1" and gate.promote("failure", "1")["promoted"]
        assert tracking.register("failure", run_id) == "2"
    home.chmod(0o755)  # jobaware makes a home 0700: the attacker, who may write the artifact folder, must reach it
    return home


@pytest.fixture
def planted(registry_home, local_user, open_folder):
    """The attacker's pickle in place of the champion's bundle (the artifact folder made theirs, as a group member's
    would be); the marker it writes when unpickled; the original files are put back afterwards."""
    (bundle,) = (registry_home / "artifacts").rglob("bundle.joblib")
    folder = bundle.parent
    saved = open_folder / "saved-bundle.joblib"
    shutil.copy2(bundle, saved)
    owner = folder.stat()
    marker = open_folder / "marker"
    marker.unlink(missing_ok=True)
    subprocess.run(["chown", "-R", f"{local_user.uid}:{local_user.gid}", str(folder)], check=True)
    try:
        local_user.run("/usr/bin/python3", "-c", PLANT, str(bundle), str(marker))
        assert bundle.read_bytes() != saved.read_bytes()
        yield marker
    finally:
        shutil.copy2(saved, bundle)
        subprocess.run(["chown", "-R", f"{owner.st_uid}:{owner.st_gid}", str(folder)], check=True)


MISMATCH = "jobaware-failure version 1: its files do not match the digest recorded at promotion; not loaded"


def test_root_predict_refuses_a_planted_pickle_and_never_runs_it(registry_home, planted, tmp_path):
    result = jobaware(registry_home, "predict", "failure", "--input", NREL_CSV, "--output", tmp_path / "out.jsonl")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"error: {MISMATCH}"]
    assert not planted.exists(), planted.read_text()
    assert not (tmp_path / "out.jsonl").exists()


def test_a_forced_promotion_of_a_version_with_planted_files_moves_nothing(registry_home, planted):
    result = jobaware(registry_home, "models", "promote", "failure", "2", "--force")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: jobaware-failure version 2: its files do not match the digest recorded at promotion; not loaded"]
    assert not planted.exists()
    assert jobaware(registry_home, "models", "verify", "failure", "1").returncode == 1


def test_a_real_bentoml_serve_refuses_a_planted_pickle_and_never_runs_it(registry_home, planted, tmp_path):
    """The service follows the champion (reloading every second here): it stays without a model (503 on /readyz),
    says why in its log, and the pickle never runs."""
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "JOBAWARE_HOME": str(registry_home), "JOBAWARE_RELOAD_SECONDS": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    with open(log, "wb") as sink:
        process = subprocess.Popen([JOBAWARE, "serve", "failure", "--port", str(port)], stdout=sink, stderr=sink,
                                   env=env, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while MISMATCH not in log.read_text(errors="replace"):  # the follower tried the champion, and refused it
            assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        for _ in range(5):  # and goes on refusing it, reload after reload
            assert httpx.get(f"{url}/readyz", timeout=10).status_code == 503
            time.sleep(1)
    finally:
        from harness.ports import stop

        stop(process, 20)
    assert not planted.exists(), planted.read_text()


def test_a_version_without_a_digest_is_refused_until_a_person_records_it(registry_home, tmp_path):
    """A version registered before digests were recorded: refused with the command that records it; recorded, it
    loads; a recorded digest is never replaced."""
    from mlflow import MlflowClient

    from jobaware.tracking import MODEL_DIGEST_TAG

    uri = f"sqlite:///{registry_home / 'mlflow.db'}"
    MlflowClient(uri, uri).delete_model_version_tag("jobaware-failure", "2", MODEL_DIGEST_TAG)
    output = tmp_path / "out.jsonl"
    refused = jobaware(registry_home, "predict", "failure", "--model-version", "2", "--input", NREL_CSV, "--output", output)
    assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [
        "error: jobaware-failure version 2: no digest of its files was recorded (registered before jobaware recorded "
        "them); not loaded. Check its files, then record it: `jobaware models verify failure 2 --record`"]
    assert jobaware(registry_home, "models", "verify", "failure", "2").returncode == 1
    recorded = jobaware(registry_home, "models", "verify", "failure", "2", "--record", "--json")
    assert recorded.returncode == 0 and '"state": "recorded"' in recorded.stdout, recorded.stderr
    loaded = jobaware(registry_home, "predict", "failure", "--model-version", "2", "--input", NREL_CSV, "--output", output)
    assert loaded.returncode == 0 and output.stat().st_size, loaded.stderr
    again = jobaware(registry_home, "models", "verify", "failure", "2", "--json")
    assert again.returncode == 0 and "matches the digest recorded at promotion" in again.stdout
