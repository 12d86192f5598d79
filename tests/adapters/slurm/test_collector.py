"""The collector on replayed Slurm output (real captures of Slurm 22.05): what each call brings, and its bounds."""

import copy
import json
import os
import time

import pytest

from jobaware.adapters.slurm.collector import Collector, Slurm, accounted_eligible
from jobaware.adapters.slurm.notices import job_id_of
from jobaware.contracts import validate_frames
from jobaware.failure.export import export
from jobaware.failure.reader import read_jobs
from jobaware.failure.reader.slurm import SacctEnd, end_state, from_squeue, sacct_as_squeue, sacct_ends
from jobaware.store import JobKey, open_store
from tests.conftest import ROOT, SQUEUE

SACCT = ROOT / "tests" / "data" / "sacct_22.05.json"  # `sacct --json -X` of the live test cluster with slurmdbd
# the test cluster enforcing memory (OverMemoryKill): jobs killed for memory, completed, exit 3, held then cancelled,
# cancelled with SIGKILL; `sacct --json -X`, `sacct -P -n -o JobIDRaw,ExitCode,MaxRSS,AllocTRES,NNodes`, squeue
OOM_SACCT, OOM_ENDS, OOM_SQUEUE = (ROOT / "tests" / "data" / name for name in (
    "sacct_oom_22.05.json", "sacct_oom_22.05.txt", "squeue_oom_22.05.json"))
# the test cluster's `sacct --json --allusers -X` once four jobs submitted together had run: 1 plain, 2 with
# `--dependency=afterok:1` (eligible when 1 ended), 3 with `--begin=now+5`, 4 submitted held (`-H`) and released
ELIGIBLE_SACCT = ROOT / "tests" / "data" / "sacct_eligible_22.05.json"


class Replay(Slurm):
    """Answers the collector's commands from captures; None where a command failed."""

    def __init__(self, **answers):
        super().__init__()
        self.answers, self.commands = answers, []

    def run(self, *command):
        self.calls += 1
        self.commands.append(command)
        name = command[0] if command[0] != "scontrol" else "_".join(command[:2])
        answer = self.answers.get(name)
        return answer(command) if callable(answer) else answer


NO_ACCOUNTING = {"sacct": None, "scontrol_show": lambda c: "AccountingStorageType   = accounting_storage/none\n"
                 if c[2] == "config" else None, "scontrol_write": lambda c: f"#!/bin/bash\necho {c[3]}\n"}


def test_without_accounting_each_finished_job_is_kept_once_from_its_last_observation(tmp_path):
    slurm = Replay(squeue=SQUEUE.read_text(), **NO_ACCOUNTING)
    store = open_store(str(tmp_path / "store"))
    collector = Collector(store, "c", slurm, max_calls=1)
    first = collector.poll()
    assert first.calls <= 3 + 1 and first.failed == ["sacct"] and collector.accounting is False
    for _ in range(4):  # one script per poll: the budget holds
        assert collector.poll().calls <= 2 + 1
    records = list(store.records())
    listed = json.loads(SQUEUE.read_text())["jobs"]
    assert len(records) == len(listed) and all(r["script"] == f"#!/bin/bash\necho {r['job_id']}\n" for r in records)
    finished = [r for r in records if r["final"]]
    assert sorted(r["final"]["state"] for r in finished) == ["COMPLETED", "FAILED"]
    assert {r["final"]["source"] for r in finished} == {"observed"}
    out = tmp_path / "jobs.csv"
    assert export(store, out) == 2
    table, report = read_jobs(out)
    assert report.bad_rows == 0 and sorted(table["state"]) == ["COMPLETED", "FAILED"]
    assert out.read_text().splitlines()[0].startswith("job_id,user,account,partition,qos,wallclock_req")
    assert validate_frames([table], "nrel_jobs")["success"]
    assert not any(c[0] == "sacct" for c in slurm.commands[len(slurm.commands) - 3:])  # no accounting: not asked again


def test_a_pending_job_s_place_in_the_queue_is_kept_and_stays_once_it_runs(tmp_path):
    """squeue's reason, priority and eligible time of a pending job (the real capture: job 3 pending for Resources,
    job 4 held by its user) are kept in its row, the times as the row keeps them; once the job runs its row keeps
    what it was while pending, beside its start; a later release's wrapped numbers read alike."""
    import time

    capture = json.loads(SQUEUE.read_text())
    store = open_store(str(tmp_path / "store"))
    collector = Collector(store, "c", Replay(squeue=json.dumps(capture), **NO_ACCOUNTING))
    collector.poll()
    rows = {r["job_id"]: r["row"] for r in store.records()}
    eligible = capture["jobs"][2]["eligible_time"]
    assert {k: rows[3][k] for k in ("reason", "priority", "eligible_time", "submit_time")} == {
        "reason": "Resources", "priority": 4294901757, "eligible_time": eligible + time.localtime(eligible).tm_gmtoff,
        "submit_time": rows[3]["submit_time"]}
    assert rows[3]["eligible_time"] - rows[3]["submit_time"] == eligible - capture["jobs"][2]["submit_time"]
    assert (rows[4]["reason"], rows[4]["priority"], rows[4].get("eligible_time")) == ("JobHeldUser", 0, None)
    assert not {"reason", "priority", "eligible_time"} & set(rows[1])  # it never pended while listed
    # job 3 starts (its priority now says nothing of its wait); job 4 is released, in a later release's numbers
    started = copy.deepcopy(capture)
    started["jobs"][2].update(job_state="RUNNING", state_reason="None", priority=1, start_time=eligible + 30)
    started["jobs"][3].update(state_reason="Priority", priority={"set": True, "infinite": False, "number": 77},
                              eligible_time={"set": True, "infinite": False, "number": eligible + 60})
    collector.slurm.answers["squeue"] = json.dumps(started)
    collector.poll()
    rows = {r["job_id"]: r for r in store.records()}
    assert (rows[3]["row"]["reason"], rows[3]["row"]["priority"]) == ("Resources", 4294901757)
    assert rows[3]["row"]["start_time"] is not None and [s["state"] for s in rows[3]["states"]] == [
        "PENDING", "RUNNING"]
    assert (rows[4]["row"]["reason"], rows[4]["row"]["priority"]) == ("Priority", 77)
    assert rows[4]["row"]["eligible_time"] - rows[4]["row"]["submit_time"] == 60
    assert export(store, tmp_path / "jobs.csv") == 2  # the failure export reads its columns, these aside


def test_accounting_gives_final_states_exit_codes_and_moves_the_checkpoint(tmp_path):
    capture = json.loads(SACCT.read_text())
    capture["jobs"][2]["state"]["current"] = "OUT_OF_MEMORY"  # cgroup limits cannot run here: the state is set
    slurm = Replay(squeue='{"jobs": []}', sacct=lambda c: json.dumps(capture) if "--json" in c else
                   "1|0:0\n2|1:0\n3|0:125\n4|0:0\n5|0:15\n", scontrol_write=lambda c: "#!/bin/bash\n")
    now = 1_795_697_000.0
    store = open_store(str(tmp_path / "store"))
    collector = Collector(store, "jobaware-test", slurm, clock=lambda: now)
    collector.poll()
    finals = {r["job_id"]: r["final"] for r in store.records()}
    assert finals == {1: {"state": "COMPLETED", "source": "sacct", "exit_code": 0, "signal": None},
                      2: {"state": "FAILED", "source": "sacct", "exit_code": 1, "signal": None},
                      3: {"state": "OUT_OF_MEMORY", "source": "sacct", "exit_code": 0, "signal": 125},
                      4: {"state": "COMPLETED", "source": "sacct", "exit_code": 0, "signal": None},
                      5: {"state": "CANCELLED", "source": "sacct", "exit_code": 0, "signal": 15}}
    row = store.get(store.keys()[2])["row"]
    assert (row["mem_req"], row["processors_req"], row["wallclock_req"], row["nodes_req"]) == (50.0, 1, 60.0, 1)
    assert store.checkpoint("jobaware-test") == {"sacct_until": int(now)}
    window = next(c for c in slurm.commands if c[0] == "sacct")
    assert any(a.startswith("--starttime=") for a in window) and any(a.startswith("--endtime=") for a in window)
    # a later observation never overrides accounting
    assert not store.put_final(store.keys()[1], "COMPLETED", "observed")
    # a day later, a poll's accounting window reaches a day at most: the series says how far behind it still is
    now += 2 * 86_400
    collector.run(1, 0.01)
    lag = collector.series.registry.get_sample_value("jobaware_collector_accounting_lag_seconds")
    assert lag == now - store.checkpoint("jobaware-test")["sacct_until"] and 86_000 < lag <= 86_400


def test_an_sacct_record_reads_as_its_squeue_record_would():
    job = json.loads(SACCT.read_text())["jobs"][1]
    row = from_squeue(sacct_as_squeue(job))
    assert (row["job_id"], row["state"], row["user"], row["partition"], row["name"]) == (2, "FAILED", "root", "debug", "job1.sh")
    per_cpu = dict(job, required={"CPUs": 4, "memory": 2**63 + 100})
    assert from_squeue(sacct_as_squeue(per_cpu))["mem_req"] == 400.0
    assert sacct_ends("7|2:0\n8|0:9\nbad|x\n") == {7: SacctEnd(2, None), 8: SacctEnd(0, 9)}


def test_a_job_killed_for_memory_is_out_of_memory_with_its_exit_code_and_signal(tmp_path):
    """Real records of the test cluster with OverMemoryKill: Slurm says `FAILED 0:9`, the batch step's MaxRSS is
    3 times its 100 MiB; the held-then-cancelled job never started."""
    ends = sacct_ends(OOM_ENDS.read_text())
    assert ends[1].signal == 9 and ends[1].exit_code == 0 and ends[1].rss_share == pytest.approx(313988 / 1024 / 100)
    assert ends[3] == SacctEnd(3, None, None) and ends[4] == SacctEnd(0, None, None) and ends[5].rss_share < 0.1
    slurm = Replay(squeue='{"jobs": []}', sacct=lambda c: OOM_SACCT.read_text() if "--json" in c else OOM_ENDS.read_text(),
                   scontrol_write=lambda c: "#!/bin/bash\n")
    store = open_store(str(tmp_path / "store"))
    Collector(store, "jobaware-test", slurm, clock=lambda: 1_795_747_600.0).poll()
    finals = {r["job_id"]: r["final"] for r in store.records()}
    assert finals == {1: {"state": "OUT_OF_MEMORY", "source": "sacct", "exit_code": 0, "signal": 9},
                      2: {"state": "COMPLETED", "source": "sacct", "exit_code": 0, "signal": None},
                      3: {"state": "FAILED", "source": "sacct", "exit_code": 3, "signal": None},
                      4: {"state": "CANCELLED", "source": "sacct", "exit_code": 0, "signal": None},
                      5: {"state": "CANCELLED", "source": "sacct", "exit_code": 0, "signal": None}}
    assert store.get(store.keys()[0])["row"]["state"] == "OUT_OF_MEMORY"


def wall(seconds: int) -> int:
    """A Slurm time as the row keeps times (the local wall clock)."""
    return seconds + time.localtime(seconds).tm_gmtoff


def test_accounting_s_eligible_time_reads_as_the_row_keeps_times_and_unknown_gives_nothing():
    jobs = json.loads(ELIGIBLE_SACCT.read_text())["jobs"]
    assert [accounted_eligible(job) for job in jobs] == [{"eligible_time": wall(job["time"]["eligible"])} for job in jobs]
    assert [job["time"]["eligible"] - job["time"]["submission"] for job in jobs] == [0, 8, 5, 2]
    held = json.loads(OOM_SACCT.read_text())["jobs"][3]  # held, then cancelled: never eligible (sacct -P: Unknown)
    assert held["time"]["eligible"] == 0 and accounted_eligible(held) == {}
    wrapped = {"set": True, "infinite": False, "number": jobs[1]["time"]["eligible"]}  # a later release's numbers
    assert accounted_eligible({"time": {"eligible": wrapped}}) == accounted_eligible(jobs[1])
    for unknown in ({"set": False, "infinite": False, "number": 0}, None, 0, "Unknown", -5, 2**40, True):
        assert accounted_eligible({"time": {"eligible": unknown}}) == {}, unknown
    assert accounted_eligible({}) == accounted_eligible({"time": "x"}) == {}


def test_accounting_s_eligible_time_wins_once_the_job_has_left_the_queue(tmp_path):
    """The four jobs of the capture, polled three times: first all pending (squeue's eligible times: the submit, 0 on
    the dependency, the begin time, 0 on the hold); then 1 and 2 have run between polls, 3 and 4 still pend while
    accounting says otherwise (stale); then all have ended. A pending job keeps squeue's live time, one that has left
    the queue (running or ended) takes accounting's, and accounting's 0 leaves what squeue said."""
    capture = json.loads(ELIGIBLE_SACCT.read_text())
    submit = capture["jobs"][0]["time"]["submission"]
    template = json.loads(SQUEUE.read_text())["jobs"][2]

    def pending(job_id, reason, eligible):
        return dict(template, job_id=job_id, submit_time=submit, state_reason=reason, eligible_time=eligible)

    def accounting(**changes):
        jobs = copy.deepcopy(capture)
        for job in jobs["jobs"]:
            job["state"]["current"], job["time"]["eligible"] = changes.get(f"job{job['job_id']}", (
                job["state"]["current"], job["time"]["eligible"]))
        return lambda c: json.dumps(jobs) if "--json" in c else ""

    slurm = Replay(squeue=json.dumps({"jobs": [pending(1, "Priority", submit), pending(2, "Dependency", 0),
                                               pending(3, "BeginTime", submit + 5), pending(4, "JobHeldUser", 0)]}),
                   sacct=lambda c: '{"jobs": []}' if "--json" in c else "", scontrol_write=lambda c: "#!/bin/bash\n")
    store = open_store(str(tmp_path / "store"))
    collector = Collector(store, "jobaware-test", slurm)

    def eligible():
        collector.poll()
        return {r["job_id"]: r["row"].get("eligible_time") for r in store.records()}

    assert eligible() == {1: wall(submit), 2: None, 3: wall(submit + 5), 4: None}
    slurm.answers["squeue"] = json.dumps({"jobs": [pending(3, "BeginTime", submit + 6), pending(4, "JobHeldUser", 0)]})
    slurm.answers["sacct"] = accounting(job1=("RUNNING", 0), job2=("RUNNING", submit + 8),
                                        job3=("PENDING", submit + 5), job4=("PENDING", submit + 2))
    assert eligible() == {1: wall(submit), 2: wall(submit + 8), 3: wall(submit + 6), 4: None}
    slurm.answers["squeue"] = '{"jobs": []}'
    slurm.answers["sacct"] = accounting(job1=("COMPLETED", 0))
    assert eligible() == {1: wall(submit), 2: wall(submit + 8), 3: wall(submit + 5), 4: wall(submit + 2)}
    assert {r["final"]["source"] for r in store.records()} == {"sacct"}


def test_without_accounting_the_signal_is_kept_and_slurm_s_words_name_a_memory_kill(tmp_path):
    """squeue gives the wait status (9: killed by signal 9) and no memory; `scontrol show job` names the error file,
    where Slurm wrote why it killed the job."""
    store = open_store(str(tmp_path / "store"))
    Collector(store, "jobaware-test", Replay(squeue=OOM_SQUEUE.read_text(), **NO_ACCOUNTING)).poll()
    finals = {r["job_id"]: r["final"] for r in store.records()}
    assert finals[1] == {"state": "FAILED", "source": "observed", "exit_code": 0, "signal": 9}
    assert finals[3] == {"state": "FAILED", "source": "observed", "exit_code": 3, "signal": None}
    errors = tmp_path / "slurm-1.out"  # the killed job's real error output
    errors.write_text("slurmstepd-localhost: error: StepId=1.batch exceeded memory limit (321523712 > 104857600), "
                      "being killed\nslurmstepd-localhost: error: Exceeded job memory limit\n")
    shown = (f"JobId=1 JobState=FAILED Reason=JobLaunchFailure ExitCode=0:9 UserId=me({os.getuid()}) StdErr={errors} "
             f"StdOut={errors}\n")
    store = open_store(str(tmp_path / "other"))
    collector = Collector(store, "jobaware-test", Replay(squeue='{"jobs": []}', **{**NO_ACCOUNTING, "scontrol_show": lambda c:
                          "AccountingStorageType = accounting_storage/none\n" if c[2] == "config" else shown}))
    store.put_job(JobKey("jobaware-test", 1, 1_795_747_497), {"job_id": 1})
    collector.poll()
    assert store.get(JobKey("jobaware-test", 1, 1_795_747_497))["final"] == {
        "state": "OUT_OF_MEMORY", "source": "scontrol", "exit_code": 0, "signal": 9}
    assert end_state("FAILED", 9) == "FAILED" and end_state("FAILED", 15, 1.2) == "FAILED"
    assert end_state("CANCELLED", 9, 0.97) == "OUT_OF_MEMORY" and end_state("COMPLETED", 9, 2.0) == "COMPLETED"


@pytest.mark.parametrize("squeue", [None, "hello", '{"jobs": [{"job_id": "x", "job_state": "PENDING"}]}'])
def test_a_failing_or_garbled_squeue_is_logged_and_tried_next_interval(tmp_path, squeue):
    store = open_store(str(tmp_path / "store"))
    result = Collector(store, "c", Replay(squeue=squeue, **NO_ACCOUNTING)).poll()
    assert result.failed[0] in ("squeue", "job x") and not list(store.records())


def test_fields_with_commas_quotes_and_newlines_round_trip(tmp_path):
    """Real clusters name partitions `short,standard` and accounts with quotes; the CSV must quote them."""
    capture = json.loads(SQUEUE.read_text())
    odd = ["short,standard", 'proj "alpha"', "line\nbreak, and comma"]
    for job, text in zip(capture["jobs"], odd * len(capture["jobs"]), strict=False):
        job["partition"], job["account"] = text, text
    store = open_store(str(tmp_path / "store"))
    Collector(store, "c", Replay(squeue=json.dumps(capture), **NO_ACCOUNTING)).poll()
    out = tmp_path / "jobs.csv"
    added = export(store, out)
    jobs, report = read_jobs(out)
    assert report.bad_rows == 0 and len(jobs) == added == 2
    assert sorted(jobs["partition"]) == sorted(jobs["account"]) == sorted(odd[:2])


class Topic:
    """Notices held in a list, as the Redis and Kafka consumers hand them over."""

    def __init__(self, *values):
        self.pending = [(i, job_id_of(v)) for i, v in enumerate(values)]
        self.acked = []

    def read(self, timeout):
        return list(self.pending)

    def ack(self, tokens):
        self.acked += tokens
        self.pending = [n for n in self.pending if n[0] not in tokens]


def test_a_notice_is_acknowledged_after_its_job_is_stored(tmp_path):
    capture = json.loads(SQUEUE.read_text())
    slurm = Replay(squeue=json.dumps(capture), **NO_ACCOUNTING)
    store = open_store(str(tmp_path / "store"))
    topic = Topic(str(capture["jobs"][0]["job_id"]), b'{"job_id": 5}', b"garbage", b"-3")
    assert Collector(store, "c", slurm).take_notices(topic, 0.1) == 4 and topic.acked == [0, 1, 2, 3]
    named = "--jobs=" + ",".join(map(str, sorted({capture["jobs"][0]["job_id"], 5})))
    assert [c for c in slurm.commands if c[0] == "squeue"] == [("squeue", "--json", "--states=all", named)]
    assert list(store.records()) and not topic.pending


def test_notices_wait_while_squeue_fails_then_go_to_the_polls(tmp_path):
    collector = Collector(open_store(str(tmp_path / "store")), "c", Replay(squeue=None, **NO_ACCOUNTING))
    topic = Topic(b"7")
    assert [collector.take_notices(topic, 0.1) for _ in range(3)] == [0, 0, 1] and topic.acked == [0]


def test_the_default_partition_is_the_one_scontrol_marks_default_and_none_when_it_cannot_say():
    partitions = ("PartitionName=long AllowGroups=ALL Default=NO MaxTime=UNLIMITED Nodes=n[1-4] State=UP\n"
                  "PartitionName=short AllowGroups=ALL Default=YES MaxTime=60 Nodes=n[1-4] State=UP\n")
    assert Replay(**{"scontrol_-o": partitions}).default_partition() == "short"
    assert Replay(**{"scontrol_-o": partitions.replace("YES", "NO")}).default_partition() is None
    assert Replay(**{"scontrol_-o": None}).default_partition() is None  # scontrol failed


def _commands(folder, squeue: str, sacct_fails: bool = True) -> dict:
    """An environment whose PATH runs scripts in `folder` as squeue, sacct and scontrol: squeue prints the capture
    `squeue` names, sacct fails as it does without accounting, scontrol says there is no accounting and gives
    scripts."""
    folder.mkdir(exist_ok=True)
    scripts = {
        "squeue": f"#!/bin/sh\ncat '{squeue}'\n",
        "sacct": "#!/bin/sh\necho 'sacct: error: Slurm accounting storage is disabled' >&2\nexit 1\n",
        "scontrol": "#!/bin/sh\ncase \"$1 $2\" in\n  'show config') echo 'AccountingStorageType   = "
                    "accounting_storage/none';;\n  'write batch_script') printf '#!/bin/bash\\necho %s\\n' \"$3\";;\n"
                    "  *) echo 'scontrol: error: Invalid job id specified' >&2; exit 1;;\nesac\n",
    }
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return {**os.environ, "PATH": f"{folder}:/usr/bin:/bin"}


def test_each_poll_is_counted_with_what_it_stored_its_lag_and_the_commands_that_failed(tmp_path):
    """The collector's series after real polls of commands that answer as Slurm does (sacct failing as it does
    without accounting): polls by outcome, jobs stored, the squeue snapshot's time, each command and failure."""
    from prometheus_client import CollectorRegistry

    from jobaware import metrics

    series = metrics.Group(metrics.COLLECTOR, CollectorRegistry())
    slurm = Slurm(env=_commands(tmp_path / "bin", str(SQUEUE)), timeout=30, series=series)
    store = open_store(str(tmp_path / "store"))
    clock = [1_800_000_000.0]
    collector = Collector(store, "c", slurm, max_calls=50, clock=lambda: clock[0], series=series)
    assert collector.run(2, 0.01) == 2
    value = series.registry.get_sample_value
    listed = len(json.loads(SQUEUE.read_text())["jobs"])
    # the first poll's sacct failed (no accounting here: not asked again), the second is whole
    assert [value("jobaware_collector_polls_total", {"outcome": o}) for o in ("partial", "ok")] == [1, 1]
    assert value("jobaware_collector_stored_total", {"what": "job"}) == listed
    assert value("jobaware_collector_stored_total", {"what": "script"}) == listed
    assert value("jobaware_collector_jobs_listed") == listed
    assert value("jobaware_collector_last_squeue_timestamp_seconds") == clock[0]
    assert value("jobaware_collector_interval_seconds") == 0.01
    assert value("jobaware_collector_slurm_commands_total", {"command": "squeue"}) == 2
    assert value("jobaware_collector_slurm_command_failures_total", {"command": "sacct"}) == 1  # then not asked
    assert value("jobaware_collector_slurm_command_failures_total", {"command": "squeue"}) is None
    assert value("jobaware_collector_poll_duration_seconds_count") == 2
    # squeue gives garbage: the poll is partial, a failure of squeue, and the snapshot's time stays
    (tmp_path / "garbage.json").write_text("hello")
    garbled = Slurm(env=_commands(tmp_path / "bin", str(tmp_path / "garbage.json")), timeout=30, series=series)
    collector.slurm = garbled
    clock[0] += 60
    collector.run(1, 0.01)
    assert value("jobaware_collector_slurm_command_failures_total", {"command": "squeue"}) == 1
    assert value("jobaware_collector_polls_total", {"outcome": "partial"}) == 2
    assert value("jobaware_collector_last_squeue_timestamp_seconds") == clock[0] - 60
