"""The policy's `raise_memory`: a job held for memory (code 34) gets RequestMemory raised with condor_qedit, then
is released; dry-run by default, never twice, within the rate, audited; where there is no more to give, the model's
call stands. The holds are written in HTCondor's wording into a log the follower reads as it grows."""

from __future__ import annotations

import htcondor2
import pytest

from jobaware.adapters.htcondor.adapter import HoldAdapter
from jobaware.adapters.htcondor.client import DecisionClient
from jobaware.adapters.htcondor.policy import Actor, Hold, Policy, load_policy, memory_call
from jobaware.audit import read_records
from tests.adapters.htcondor.test_adapter import Answers, RecordedSchedd, _holds, _live
from tests.conftest import free_port

RAISE = {"margin": 0.2, "cap_mb": 4096}


def ran(cluster: int, minute: int) -> list[bytes]:
    at = f"2025-05-01 10:{minute:02d}"
    return [f"001 ({cluster}.000.000) {at}:10 Job executing on host: <10.0.0.7:9618?sock=startd_1_2>\n"
            "\tSlotName: slot1_1@node7\n...\n".encode(),
            f"006 ({cluster}.000.000) {at}:40 Image size of job updated: 3000000\n"
            "\t2900  -  MemoryUsage of job (MB)\n\t2969600  -  ResidentSetSize of job (KB)\n...\n".encode()]


def held(cluster: int, minute: int, limit: int, peak: int) -> bytes:
    return (f"012 ({cluster}.000.000) 2025-05-01 10:{minute:02d}:50 Job was held.\n\tError from slot1_1@node7: Job "
            f"has gone over cgroup memory limit of {limit} megabytes. Peak usage: {peak} megabytes.  Consider "
            "resubmitting with a higher request_memory.\n\tCode 34 Subcode 0\n...\n").encode()


def released(cluster: int, minute: int) -> bytes:
    return f"013 ({cluster}.000.000) 2025-05-01 10:{minute:02d}:55 Job was released.\n\tvia condor_release\n...\n".encode()


def job(cluster: int, holds: list[tuple[int, int]]) -> list[bytes]:
    """Submitted, then per (limit, peak): run and held for memory, released before the next run."""
    events = [f"000 ({cluster}.000.000) 2025-05-01 10:00:00 Job submitted from host: <10.0.0.1:9618>\n...\n".encode()]
    for n, (limit, peak) in enumerate(holds):
        events += ([released(cluster, 10 * n + 1)] if n else []) + ran(cluster, 10 * n + 2) + \
            [held(cluster, 10 * n + 3, limit, peak)]
    return events


def _acted(audit) -> list[dict]:
    return [r for r in read_records(audit) if r["kind"] == "acted"]


def test_a_memory_hold_is_raised_then_released_once_each_up_to_the_cap_then_the_models_call_stands(tmp_path):
    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    policy = Policy(mode="act", raise_memory=RAISE)
    schedd = RecordedSchedd()
    with Answers({201: 0.5}) as service:  # the model: between the thresholds, no call of its own
        watch = HoldAdapter([log], audit, client=DecisionClient(service.url), policy=policy, actor=Actor(schedd))
        _live(watch, log, job(201, [(3072, 3070), (3684, 3690), (4096, 4090)]))
        watch.close()
        job_spec = "ClusterId == 201 && ProcId == 0"
        assert schedd.calls == [
            ("edit", job_spec, "RequestMemory", "3684"),
            (htcondor2.JobAction.Release, job_spec, "jobaware: raise_memory: held at 3072 MB with a peak of 3070 MB; "
                                                    "RequestMemory 3684 MB (peak + 20%, cap 4096 MB)"),
            ("edit", job_spec, "RequestMemory", "4096"),  # 3690 + 20 % is past the cap
            (htcondor2.JobAction.Release, job_spec, "jobaware: raise_memory: held at 3684 MB with a peak of 3690 MB; "
                                                    "RequestMemory 4096 MB (peak + 20%, cap 4096 MB)"),
        ]
        holds = _holds(audit)
        assert [(h["recommended"], h["action"], h["raise_memory"]["to_mb"]) for h in holds] == [
            ("none", "raise", 3684), ("none", "raise", 4096), ("none", "none", None)]
        assert holds[0]["command"] == "condor_qedit 201.0 RequestMemory 3684 && condor_release 201.0"
        assert holds[0]["call"].startswith(f"Schedd.edit({job_spec!r}, 'RequestMemory', '3684'); "
                                           f"Schedd.act(JobAction.Release, {job_spec!r}, reason=")
        assert holds[0]["raise_memory"] | {"fired": None} == {"request_mb": 3072, "peak_mb": 3070, "to_mb": 3684,
                                                              "fired": None}
        # at the cap: no more to give, the model's call (none here) stands, and the audit says why
        assert holds[2]["raise_memory"]["fired"] == ("held at 4096 MB with a peak of 4090 MB: no more to give (peak "
                                                     "+ 20%, cap 4096 MB)")
        assert holds[2]["not_acted_because"] == holds[2]["fired"] == "P(release) 0.500 between remove_below and " \
                                                                     "release_above"
        assert [(a["hold_id"], a["action"], a["memory_mb"], a["ok"]) for a in _acted(audit)] == [
            (holds[0]["id"], "raise", 3684, True), (holds[1]["id"], "raise", 4096, True)]
        assert _acted(audit)[0]["answer"] == "RequestMemory=3684 on 1 job(s); TotalSuccess=1, TotalError=0, " \
                                             "TotalNotFound=0"

        # read again from the start (the position lost): every hold is known, nothing is edited or released twice
        (tmp_path / "audit.jsonl.state.json").unlink()
        again = HoldAdapter([log], audit, client=DecisionClient(service.url), policy=policy, actor=Actor(schedd))
        counts = again.step()
        again.close()
    assert counts.holds == 0 and counts.seen_before == 3 and len(schedd.calls) == 4


def test_dry_run_by_default_says_what_it_would_do(tmp_path):
    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    lines = []
    watch = HoldAdapter([log], audit, policy=Policy(raise_memory=RAISE), on_line=lines.append)  # no service
    _live(watch, log, job(202, [(3072, 3070)]))
    watch.close()
    (hold,) = _holds(audit)
    assert (hold["mode"], hold["action"], hold["not_acted_because"]) == ("dry-run", "none", "dry-run")
    assert hold["command"] == "condor_qedit 202.0 RequestMemory 3684 && condor_release 202.0"
    assert lines == ["hold 202.0.0 at 2025-05-01 10:03:50 code 34/0: no decision, recommend none; site rule release; "
                     "raise_memory: RequestMemory 3684 MB, release; not acted (dry-run)"]
    assert _acted(audit) == []


def test_off_by_default_a_memory_hold_gets_the_models_call(tmp_path):
    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    schedd = RecordedSchedd()
    with Answers({203: 0.95}) as service:
        watch = HoldAdapter([log], audit, client=DecisionClient(service.url), policy=Policy(mode="act"),
                            actor=Actor(schedd))
        _live(watch, log, job(203, [(3072, 3070)]))
        watch.close()
    assert schedd.calls == [(htcondor2.JobAction.Release, "ClusterId == 203 && ProcId == 0",
                             "jobaware: P(release) 0.950 >= release_above 0.9")]
    assert _holds(audit)[0]["raise_memory"] is None and _holds(audit)[0]["command"] == "condor_release 203.0"


def test_the_raise_is_the_policys_rule_it_needs_no_model_but_keeps_the_rate(tmp_path):
    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    schedd = RecordedSchedd()
    client = DecisionClient(f"http://127.0.0.1:{free_port()}", timeout=1)  # the service down
    watch = HoldAdapter([log], audit, client=client, policy=Policy(mode="act", raise_memory=RAISE, acts_per_minute=1),
                        actor=Actor(schedd))
    _live(watch, log, job(204, [(3072, 3070)]) + job(205, [(2048, 2000)]))
    watch.close()
    assert schedd.calls[0] == ("edit", "ClusterId == 204 && ProcId == 0", "RequestMemory", "3684")
    assert len(schedd.calls) == 2  # 205 only recorded: one act a minute
    holds = _holds(audit)
    assert holds[0]["p_release"] is None and holds[0]["action"] == "raise"
    assert (holds[1]["action"], holds[1]["not_acted_because"]) == ("none", "rate limit: 1 acts per minute")
    # the job's largest peak is its image-size update's 2900 MB, above its hold's 2000 MB: 2900 + 20 %
    assert holds[1]["raise_memory"] | {"fired": None} == {"request_mb": 2048, "peak_mb": 2900, "to_mb": 3480,
                                                          "fired": None}


def test_a_job_gone_from_the_queue_is_not_released_and_the_failure_is_audited(tmp_path):
    class Gone(RecordedSchedd):
        def edit(self, job_spec, attr, value, flags=htcondor2.TransactionFlag.Default):
            return 0

    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    schedd = Gone()
    watch = HoldAdapter([log], audit, policy=Policy(mode="act", raise_memory=RAISE), actor=Actor(schedd))
    _live(watch, log, job(206, [(3072, 3070)]))
    watch.close()
    (acted,) = _acted(audit)
    assert schedd.calls == [] and not acted["ok"]
    assert acted["error"] == "LookupError: RequestMemory not set: no job matched ClusterId == 206 && ProcId == 0"


def test_the_raise_leaves_manual_codes_and_jobs_past_the_caps_to_the_other_decisions():
    policy = Policy(raise_memory=RAISE, max_holds=3)
    assert memory_call(policy, Hold(1, 0, 34, 0, job_starts=1, holds=1), 3072, 3070).memory_mb == 3684
    assert memory_call(policy, Hold(1, 0, 34, 0, job_starts=1, holds=4), 3072, 3070).fired == \
        "past max_job_starts/max_holds"
    manual = Policy(raise_memory=RAISE, release_codes=[13], manual_codes=[34])
    assert memory_call(manual, Hold(1, 0, 34, 0, job_starts=1, holds=1), 3072, 3070).fired == "manual_codes"
    assert memory_call(policy, Hold(1, 0, 34, 0, job_starts=1, holds=1), None, 3070).fired == \
        "the hold names no memory limit"
    assert memory_call(Policy(), Hold(1, 0, 34, 0, job_starts=1, holds=1), 3072, 3070).action == "none"


def test_a_peak_above_the_cap_or_no_peak_is_not_raised_and_says_why():
    """Found by a hostile review: a peak of 5000 MB with a cap of 4096 MB raised RequestMemory to 4096 MB, below
    what the job was seen to use (it would only be held again, one more start and hold spent), and the audit called
    4096 MB 'peak + 20%'; a hold naming no peak read 'a peak of None MB'."""
    policy, hold = Policy(raise_memory=RAISE), Hold(1, 0, 34, 0, job_starts=1, holds=1)
    above = memory_call(policy, hold, 2048, 5000)
    assert above.action == "none" and above.fired == "held at 2048 MB with a peak of 5000 MB, above the cap of 4096 MB: " \
        "raising it to the cap would not help"
    assert memory_call(policy, hold, 2048, 4000).memory_mb == 4096  # the peak fits under the cap: up to the cap
    assert memory_call(policy, hold, 2048, 4096).memory_mb == 4096
    assert memory_call(policy, hold, 2048, None).fired == "held at 2048 MB; no event names the job's peak"


@pytest.mark.parametrize("text, words", [
    ("raise_memory: {margin: 0.2}\n", "raise_memory.cap_mb: field required"),
    ("raise_memory: {cap_mb: 4096, margin: -1}\n", "raise_memory.margin: input should be greater than or equal to 0"),
    ("raise_memory: {cap_mb: 4096, by: 2}\n", "raise_memory.by: unknown field"),
])
def test_a_policy_file_states_the_raise_or_is_refused_with_one_line(tmp_path, text, words):
    from jobaware.errors import InputError

    path = tmp_path / "policy.yaml"
    path.write_text("raise_memory: {margin: 0.5, cap_mb: 65536}\n")
    assert load_policy(path).raise_memory.cap_mb == 65536 and load_policy(None).raise_memory is None
    path.write_text(text)
    with pytest.raises(InputError) as error:
        load_policy(path)
    assert words in str(error.value) and "\n" not in str(error.value)
