"""The adapter on a live one-node Slurm with the real failure and resource services: verdicts written into the
jobs' comments, once per job and model versions, audited; services stopped mid-run and the cluster untouched;
verdicts catching up when they return; the job card (CLI and gateway) and live accuracy."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.ports import stop
from harness.slurm_cluster import SlurmCluster, require_slurm
from jobaware.adapters.slurm.adapter import Policy, comment_with, read_policy
from jobaware.adapters.slurm.verdicts import read_cache
from jobaware.card import declared, short
from jobaware.errors import JobawareError
from tests.conftest import REAL, free_port, wait_for

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))
CPU_SCRIPT = "#!/bin/bash\npython3 -c 'print(sum(i * i for i in range(10**6)))'\n"


# ---------------------------------------------------------------- the rules, without a cluster
def test_a_verdict_keeps_the_users_own_comment_and_replaces_an_earlier_verdict():
    assert comment_with(None, "jobaware: failure risk 10%") == "jobaware: failure risk 10%"
    assert comment_with("my run 3", "jobaware: a") == "my run 3 | jobaware: a"
    assert comment_with("my run 3 | jobaware: a", "jobaware: b") == "my run 3 | jobaware: b"
    assert len(comment_with("x" * 400, "jobaware: b")) == 250


def test_the_short_form_is_the_parts_words_in_registry_order():
    card = {"parts": {"failure": {"status": "ok", "p_fail": 0.71, "likely": "TIMEOUT", "threshold": 0.3,
                                  "likely_fail": True, "model_version": "4"},
                      "resource": {"status": "ok", "binding": "io"}, "similarity": {"status": "not_applicable"}}}
    assert short(card) == "jobaware: failure risk 71%, TIMEOUT likely; model 4; io-bound"
    card["parts"]["failure"] = {"status": "unavailable"}
    assert short(card) == "jobaware: failure risk unknown; io-bound"


def test_a_policy_file_is_checked_field_by_field(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("hold: true\nhold_threshold: 1.5\n")
    with pytest.raises(JobawareError, match="hold_threshold"):
        read_policy(path)
    path.write_text("comment: false\nmax_acts_per_minute: 5\ncapabilities: {resource: off}\n")
    assert read_policy(path) == Policy(comment=False, max_acts_per_minute=5, capabilities={"resource": False})
    assert read_policy(path).keys() == [key for key in declared() if key != "resource"]
    path.write_text("holdd: true\n")
    with pytest.raises(JobawareError, match="holdd: unknown field"):
        read_policy(path)
    path.write_text("capabilities: {colour: off}\n")
    with pytest.raises(JobawareError, match="capabilities: colour: not a capability with a card part"):
        read_policy(path)
    toml = tmp_path / "policy.toml"
    toml.write_text('hold = true\n[capabilities]\nsimilarity = "off"\n')
    assert read_policy(toml).keys() == [key for key in declared() if key != "similarity"] and read_policy(toml).hold


def test_each_pass_is_counted_with_its_verdicts_flags_acts_deferrals_and_the_cache(tmp_path):
    """The adapter's series over two passes of the real squeue capture (jobs 3 and 4 pending): with the failure
    service up (a loopback stand-in answering in its format: job 3 flagged), two verdicts, each part's status, one
    job flagged, two comments (dry run) and the cache; then with it down, both jobs deferred and the back-off on."""
    from prometheus_client import CollectorRegistry

    from jobaware import metrics
    from jobaware.adapters.slurm.adapter import PendingJobAdapter
    from jobaware.store import open_store
    from tests.adapters.slurm.test_collector import Replay
    from tests.conftest import SQUEUE
    from tests.loopback import JsonServer

    def predict(method, path, body):
        if method == "GET":
            return 200, {}
        p_fail = 0.8 if body["jobs"][0]["job_id"] == 3 else 0.1
        return 200, {"model_version": "7", "predictions": [{
            "p_fail": p_fail, "most_likely_failure": "FAILED", "threshold": 0.5, "likely_fail": p_fail >= 0.5}]}

    server = JsonServer(predict, free_port()).start()
    series = metrics.Group(metrics.ADAPTER, CollectorRegistry())
    slurm = Replay(squeue=SQUEUE.read_text(), scontrol_write=lambda c: "#!/bin/bash\necho hi\n")
    value = lambda name, **labels: series.registry.get_sample_value(name, {"adapter": "slurm", **labels})  # noqa: E731
    with open_store(str(tmp_path / "store")) as store, PendingJobAdapter(
            store, "c", {"failure": server.url}, Policy(backoff_s=60), cache=tmp_path / "verdicts.tsv", slurm=slurm,
            series=series) as adapter:
        assert adapter.run_pass().judged == 2
        assert value("jobaware_adapter_passes_total", outcome="ok") == 1
        assert value("jobaware_adapter_pending_jobs") == 2 and value("jobaware_adapter_verdicts_total") == 2
        assert value("jobaware_adapter_parts_total", capability="failure", status="ok") == 2
        assert value("jobaware_adapter_flagged_total", capability="failure") == 1
        assert value("jobaware_adapter_actions_total", action="comment", outcome="dry_run") == 2
        assert value("jobaware_adapter_cache_entries") == len(read_cache(tmp_path / "verdicts.tsv").verdicts) == 2
        assert value("jobaware_adapter_cache_bytes") == (tmp_path / "verdicts.tsv").stat().st_size
        assert value("jobaware_adapter_cache_stale_after_seconds") == Policy().cache_stale_after_s
        assert value("jobaware_adapter_service_backoff", capability="failure") == 0
        server.stop()
        later = json.loads(SQUEUE.read_text())  # two new jobs pending, as jobs 3 and 4 were
        for job in later["jobs"]:
            job["job_id"] += 100
        slurm.answers["squeue"] = json.dumps(later)
        assert adapter.run_pass().deferred == 2
        assert value("jobaware_adapter_passes_total", outcome="waiting") == 1
        assert value("jobaware_adapter_deferred_total") == 2
        assert value("jobaware_adapter_service_backoff", capability="failure") == 1
        assert value("jobaware_adapter_verdicts_total") == 2


# ---------------------------------------------------------------- live
@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_slurm()
    from jobaware.adapters.slurm.plugins import write_plugins

    root = tmp_path_factory.mktemp("slurm-adapt")
    write_plugins(root, cache=str(root / "verdicts.tsv"))  # the submit-time hook reads what the adapter caches
    slurm = SlurmCluster(root, cpus=2, lua_plugins=True).start()
    yield slurm
    slurm.stop()


@pytest.fixture(scope="module")
def resource_champion(champion, tmp_path_factory) -> str:
    """A resource model trained quickly on the real labelled scripts, registered and promoted beside failure's."""
    from jobaware import gate, tracking
    from jobaware.resource.reader import ingest
    from jobaware.resource.train import train

    dataset = tmp_path_factory.mktemp("resource-data")
    ingest([str(REAL / "scripts")], dataset)
    params = {"cv_repeats": 1, "candidates": ["rich"]}
    bundle, evaluation = train(dataset, params, tmp_path_factory.mktemp("resource-train"))
    run_id = tracking.start_run("resource", params, {"success": True})
    tracking.log_model(run_id, "resource", bundle)
    tracking.log_evaluation(run_id, evaluation.metrics, evaluation.plots, evaluation.eval_dir)
    version = tracking.register("resource", run_id)
    assert gate.promote("resource", version)["promoted"]
    return version


class Service:
    """`jobaware serve KEY` (or `bentoml serve TARGET`) on a free loopback port, stopped and started at will."""

    def __init__(self, command: list[str], log: Path, env: dict | None = None):
        self.command, self.log, self.env, self.process = command, log, env, None
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> Service:
        self.process = subprocess.Popen([*self.command, "--port", str(self.port)], stdout=open(self.log, "ab"),
                                        stderr=subprocess.STDOUT, start_new_session=True, env=self.env)
        wait_for(f"{self.url}/readyz", 180, self.process)
        return self

    def stop(self) -> None:
        if self.process:
            stop(self.process)


@pytest.fixture(scope="module")
def services(champion, resource_champion, tmp_path_factory):
    logs = tmp_path_factory.mktemp("adapter-services")
    started = {key: Service([JOBAWARE, "serve", key], logs / f"{key}.log") for key in ("failure", "resource")}
    try:
        for service in started.values():
            service.start()
        yield started
    finally:
        for service in started.values():
            service.stop()


def adapt(cluster, store: Path, services: dict, *args: str) -> str:
    args = (*args, "--cache", str(cluster.root / "verdicts.tsv"))
    down = f"http://127.0.0.1:{free_port()}"  # every other card part's service: not deployed here
    env = {**cluster.env, **{f"JOBAWARE_{key.upper()}_URL": down for key in declared()},
           "JOBAWARE_FAILURE_URL": services["failure"].url, "JOBAWARE_RESOURCE_URL": services["resource"].url}
    done = subprocess.run([JOBAWARE, "slurm", "adapt", "--store", str(store), "--interval", "0.2", *args], env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr


def field(cluster, job_id: int, name: str) -> str:
    shown = cluster.run("scontrol", "show", "job", "-o", str(job_id))
    return shown.split(f" {name}=", 1)[1].split(" ")[0] if f" {name}=" in shown else ""


def wait_states(cluster, ids: list[int], states: set[str], seconds: float = 120) -> dict[int, str]:
    deadline = time.monotonic() + seconds
    while True:
        now = {i: field(cluster, i, "JobState") for i in ids}
        if all(s in states for s in now.values()) or time.monotonic() > deadline:
            return now
        time.sleep(1)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_verdicts_reach_the_comments_once_and_catch_up_after_an_outage(cluster, services, tmp_path):
    store, audit = tmp_path / "store", tmp_path / "audit.jsonl"
    blocker = cluster.sbatch("#!/bin/bash\nsleep 600\n", "-c", "1", "--time=10", "--job-name=blocker")
    assert wait_states(cluster, [blocker], {"RUNNING"}, 60)[blocker] == "RUNNING"
    waiting = [cluster.sbatch(CPU_SCRIPT, "-c", "2", "--time=1", f"--job-name=wide{i}", "--comment=run 7")
               for i in range(2)]
    # a dry run judges and audits, and writes nothing into Slurm
    shown = adapt(cluster, store, services, "--audit", str(audit))
    assert "dry run" in shown and all(field(cluster, j, "Comment") == "run" for j in waiting)
    dry = [json.loads(line) for line in audit.read_text().splitlines()]
    assert {r["job_id"] for r in dry} == set(waiting) and all(r["dry_run"] and r["done"] is None for r in dry)
    # acting: the verdict in each waiting job's comment, after the user's own
    shown = adapt(cluster, store, services, "--audit", str(audit), "--act", "--passes", "2")
    for job in waiting:
        comment = cluster.run("scontrol", "show", "job", str(job))
        assert "Comment=run 7 | jobaware: failure risk " in comment, comment
    acts = [json.loads(line) for line in audit.read_text().splitlines()][len(dry):]
    assert len(acts) == len(waiting) and all(r["done"] and r["versions"]["failure"] for r in acts)
    assert all(set(r["versions"]) == {"failure", "resource"} for r in acts)
    assert "pass 2: 2 pending, 0 new verdicts, 0 acts" in shown  # once per job and model versions

    # the services go down: the adapter backs off, writes nothing, leaves the cache to age, and the cluster runs on
    written = read_cache(cluster.root / "verdicts.tsv").created
    time.sleep(1.1)
    for service in services.values():
        service.stop()
    narrow = cluster.sbatch("#!/bin/bash\necho narrow\n", "-c", "1", "--time=1", "--job-name=narrow")
    late = cluster.sbatch("#!/bin/bash\nexit 3\n", "-c", "2", "--time=1", "--job-name=late")
    shown = adapt(cluster, store, services, "--audit", str(audit), "--act", "--passes", "2")
    assert "0 new verdicts" in shown and "waiting for: failure" in shown and "cache not rewritten" in shown
    assert read_cache(cluster.root / "verdicts.tsv").created == written  # old verdicts never look fresh
    assert wait_states(cluster, [narrow], {"COMPLETED"})[narrow] == "COMPLETED"  # ran while jobaware was down
    audited = lambda job: [r for r in map(json.loads, audit.read_text().splitlines()) if r["job_id"] == job]  # noqa: E731
    assert audited(late) == []  # the adapter wrote nothing; the hook gave `late` its shape's cached verdict
    assert "Comment=jobaware: failure risk " in cluster.run("scontrol", "show", "job", str(late))
    # back: the job that waited gets its own verdict
    for service in services.values():
        service.start()
    shown = adapt(cluster, store, services, "--audit", str(audit), "--act")
    assert "1 new verdicts" in shown and "cached" in shown and [r["done"] for r in audited(late)] == [True]
    # the loop closed inside slurmctld: a new job of a judged shape gets its verdict at submission, from the cache
    cached = read_cache(cluster.root / "verdicts.tsv").verdicts
    assert cached and {(v.user, v.partition) for v in cached} == {("root", "debug")}
    # with the cluster's default partition, cli_filter advises a job that names no partition
    assert read_cache(cluster.root / "verdicts.tsv").default_partition == "debug"
    same_shape = cluster.sbatch(CPU_SCRIPT, "-c", "2", "--time=1", "--hold", "--job-name=same")
    assert "Comment=jobaware: failure risk " in cluster.run("scontrol", "show", "job", str(same_shape))
    cluster.run("scancel", str(same_shape))

    # the jobs end; the collector keeps their ends; live accuracy by week and model version
    cluster.run("scancel", str(blocker))
    ends = wait_states(cluster, [*waiting, late], {"COMPLETED", "FAILED"})
    assert sorted(ends.values()) == ["COMPLETED", "COMPLETED", "FAILED"], ends
    collected = subprocess.run([JOBAWARE, "slurm", "collect", "--store", str(store), "--polls", "2", "--interval",
                                "1"], env=cluster.env, capture_output=True, text=True, timeout=120)
    assert collected.returncode == 0, collected.stderr
    report = subprocess.run([JOBAWARE, "failure", "accuracy", "--store", str(store), "--json"], capture_output=True,
                            text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    rows = json.loads(report.stdout)
    assert len(rows) == 1 and rows[0]["jobs"] == 3 and rows[0]["failed"] == 1
    assert 0 <= rows[0]["roc_auc"] <= 1 and 0 <= rows[0]["ece"] <= 1
    live = subprocess.run([JOBAWARE, "report", "live", "--store", str(store), "--json"], capture_output=True,
                          text=True, timeout=60)
    assert live.returncode == 0 and json.loads(live.stdout)["failure"] == rows, live.stderr  # one table of several


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_job_card_answers_part_by_part(cluster, services, tmp_path):
    job = cluster.sbatch(CPU_SCRIPT, "--hold", "--time=1", "--job-name=carded")
    down = f"http://127.0.0.1:{free_port()}"  # every other card part's service: not deployed here
    env = {**cluster.env, **{f"JOBAWARE_{key.upper()}_URL": down for key in declared()},
           "JOBAWARE_FAILURE_URL": services["failure"].url, "JOBAWARE_RESOURCE_URL": services["resource"].url}
    shown = subprocess.run([JOBAWARE, "card", str(job), "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    card = json.loads(shown.stdout)
    assert card["parts"]["failure"]["status"] == "ok" and card["parts"]["resource"]["status"] == "ok"
    assert card["parts"]["similarity"]["status"] == "not_applicable"
    # a part that applies to this held job but whose service is not deployed here is missing, and says why
    missing = [key for key, said in card["parts"].items() if said["status"] not in ("ok", "not_applicable")]
    assert card["missing"] == missing and not {"failure", "resource"} & set(missing)
    assert all(card["parts"][key]["status"] == "unavailable" and down in card["parts"][key]["reason"]
               for key in missing), card["parts"]
    assert card["short"].startswith("jobaware: failure risk ")
    # the gateway: one HTTP answer; a service that is down is named, not fatal
    gateway = Service([str(Path(sys.executable).with_name("bentoml")), "serve", "jobaware.serving.card:CardService"],
                      tmp_path / "card.log", {**env, "JOBAWARE_RESOURCE_URL": f"http://127.0.0.1:{free_port()}"})
    try:
        gateway.start()
        import httpx

        record = json.loads(cluster.run("squeue", "--json", f"--jobs={job}"))["jobs"][0]
        answer = httpx.post(f"{gateway.url}/card", json={"job_id": job, "job": record, "script": CPU_SCRIPT},
                            timeout=60).json()
        assert answer["parts"]["failure"]["status"] == "ok"
        assert answer["missing"] == [key for key in declared() if key in {"resource", *missing}]
        assert answer["parts"]["resource"]["status"] == "unavailable"
        bad = httpx.post(f"{gateway.url}/card", json={"job_id": -1, "job": {}}, timeout=60)
        assert bad.status_code == 400
    finally:
        gateway.stop()
        cluster.run("scancel", str(job))


def test_the_cache_holds_per_shape_the_latest_verdict_and_how_such_jobs_ended(tmp_path):
    from jobaware.adapters.slurm.adapter import cached_verdicts, verdict_name
    from jobaware.store import JobKey, open_store

    store = open_store(str(tmp_path / "store"))
    row = {"user": "alice", "account": "chem", "partition": "debug", "wallclock_req": 3600.0, "nodes_req": 1,
           "processors_req": 4, "mem_req": 1000.0, "gpus_req": 0}
    now = time.time()
    for i, (state, p_fail) in enumerate([("TIMEOUT", 0.2), ("COMPLETED", 0.3), (None, 0.8)]):
        key = JobKey("c", 10 + i, int(now) - 100 + i)
        store.put_job(key, {**row, "processors_req": 4 + i % 2})  # 4 and 5 CPUs: the same doubling bucket
        if state:
            store.put_final(key, state, "sacct", 0)
        card = {"created": now - 50 + i, "parts": {
            "failure": {"status": "ok", "p_fail": p_fail, "likely": "TIMEOUT", "threshold": 0.5,
                        "likely_fail": p_fail >= 0.5, "model_version": "3"},
            "resource": {"status": "ok", "binding": "mem", "model_version": "2"}}}
        store.put_prediction(key, verdict_name({"failure": "3", "resource": "2"}), {"card": card, "acts": []})
    store.put_job(JobKey("c", 99, int(now)), {**row, "user": "bad name"})  # no name the cache can hold
    [verdict] = cached_verdicts(store, "c", Policy())
    assert (verdict.user, verdict.account, verdict.partition) == ("alice", "chem", "debug")
    assert verdict.comment == "failure risk 80%, TIMEOUT likely; 1/2 similar failed; model 3; memory-bound"
    assert verdict.advice == ("failure risk 80%, TIMEOUT likely: jobs like this one ran out of time in 1 of their "
                              "last 2 runs; ask for more --time[ than the {time_minutes} minutes asked] (model 3).")
    assert (verdict.n_similar, verdict.created) == (2, int(now - 48))
    assert cached_verdicts(store, "other-cluster", Policy()) == []
    assert cached_verdicts(store, "c", Policy(), now=now + 31 * 86_400) == []  # older than cache_days: none
