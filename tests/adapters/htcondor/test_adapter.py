"""Holds decided over HTTP and acted upon only as the policy says: the exact htcondor2 calls, none twice.

The model's answers here come from a small loopback HTTP server that answers `/hold-decision` in the hold
service's format with a stated P(release) per cluster (the real service is in test_service.py); the schedd is
a recorded fake with the signatures of `htcondor2.Schedd`.
"""

from __future__ import annotations

import inspect
import json
import subprocess

import htcondor2
import pytest

from jobaware.adapters.htcondor.adapter import HoldAdapter, trained_on_real
from jobaware.adapters.htcondor.client import DecisionClient
from jobaware.adapters.htcondor.policy import Actor, Policy
from jobaware.audit import read_records
from tests.adapters.htcondor.conftest import ADAPTER, CONDOR, ROOT, real_events
from tests.conftest import free_port
from tests.loopback import JsonServer

RELEASED_TWICE = real_events(CONDOR / "mldag_standalone" / "metl_12634462.log")  # holds 26/0, 47/0, 47/0
REMOVED = real_events(CONDOR / "mldag_standalone" / "metl_12636334.log")  # holds 1/0, then 26/103 four times


def renumber(events: list[bytes], cluster: int) -> list[bytes]:
    return [e.replace(e[e.index(b"(") + 1:e.index(b".")], str(cluster).encode(), 1) for e in events]


class RecordedSchedd:
    """A recorded fake of `htcondor2.Schedd`: the same `__init__`, `act` and `edit` signatures; calls are kept."""

    def __init__(self, location=None):
        self.calls: list[tuple] = []

    def act(self, action, job_spec, reason=None):
        self.calls.append((action, job_spec, reason))
        return {"TotalSuccess": 1, "TotalError": 0, "TotalNotFound": 0}

    def edit(self, job_spec, attr, value, flags=htcondor2.TransactionFlag.Default):
        self.calls.append(("edit", job_spec, attr, value))
        return 1


def test_the_fake_schedd_has_the_real_signatures():
    for name in ("__init__", "act", "edit"):
        real, fake = inspect.signature(getattr(htcondor2.Schedd, name)), inspect.signature(getattr(RecordedSchedd, name))
        assert [(p.name, p.default, p.kind) for p in real.parameters.values()] == \
            [(p.name, p.default, p.kind) for p in fake.parameters.values()]


class Answers:
    """A loopback stand-in for the hold service: P(release) by cluster, the model's training as stated."""

    def __init__(self, p_release: dict[int, float], source: str = "real", max_body: int = 1 << 30):
        self.p_release, self.source, self.max_body, self.requests = p_release, source, max_body, []
        self.server = JsonServer(self.answer, free_port())
        self.url = self.server.url

    def answer(self, method: str, path: str, body) -> tuple[int, object]:
        if len(json.dumps(body)) > self.max_body:
            return 413, {}
        self.requests.append(body)
        return 200, {"cluster": body["cluster"], "proc": body["proc"],
                     "p_release": self.p_release.get(body["cluster"], 0.5), "decision": "release", "model_version": "9",
                     "decided_by": "pool", "trained_on": {"source": self.source, "labelled_holds": 1200}}

    def __enter__(self):
        self.server.start()
        return self

    def __exit__(self, *exc):
        self.server.stop()


def _live(watch: HoldAdapter, log, events: list[bytes]) -> None:
    """Write the events one by one, the watch polling after each (a schedd's log as it grows)."""
    for event in events:
        with open(log, "ab") as handle:
            handle.write(event)
        watch.step()


def _holds(audit) -> list[dict]:
    return [r for r in read_records(audit) if r["kind"] == "hold"]


POLICY = Policy(mode="act", release_codes=[12, 13, 26], manual_codes=[1], acts_per_minute=3,
                release_above=0.9, remove_below=0.05)


def test_the_enabled_policy_makes_exactly_the_intended_calls_and_none_twice(tmp_path):
    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    schedd = RecordedSchedd()
    with Answers({101: 0.95, 102: 0.01}) as service:
        watch = HoldAdapter([log], audit, client=DecisionClient(service.url), policy=POLICY, actor=Actor(schedd))
        _live(watch, log, renumber(RELEASED_TWICE, 101) + renumber(REMOVED, 102))
        watch.close()
        assert schedd.calls == [
            (htcondor2.JobAction.Release, "ClusterId == 101 && ProcId == 0",
             "jobaware: P(release) 0.950 >= release_above 0.9"),
            (htcondor2.JobAction.Remove, "ClusterId == 102 && ProcId == 0", "jobaware: P(release) 0.010 <= remove_below 0.05"),
            (htcondor2.JobAction.Remove, "ClusterId == 102 && ProcId == 0", "jobaware: P(release) 0.010 <= remove_below 0.05"),
        ]
        holds = _holds(audit)
        assert [(h["job"], h["hold_code"], h["site_rule"], h["recommended"], h["action"]) for h in holds] == [
            ("101.0.0", 26, "release", "release", "release"),
            ("101.0.0", 47, "none", "none", "none"),  # 47 is not in the allow-list
            ("101.0.0", 47, "none", "none", "none"),
            ("102.0.0", 1, "none", "none", "none"),  # always manual
            ("102.0.0", 26, "release", "remove", "remove"),
            ("102.0.0", 26, "release", "remove", "remove"),
            ("102.0.0", 26, "remove", "remove", "none"),  # NumHolds 4 > max_holds 3; the rate limit: 3 a minute
            ("102.0.0", 26, "remove", "remove", "none"),
        ]
        assert holds[6]["not_acted_because"] == "rate limit: 3 acts per minute" and holds[6]["site_rule_fired"] == "max_holds"
        assert holds[3]["fired"] == "manual_codes" and holds[1]["fired"].endswith("code 47 is not in release_codes")
        assert all(h["model_version"] == "9" and h["trained_on"]["source"] == "real" for h in holds)
        assert all(h["decided_by"] == "pool" for h in holds)  # which decision-maker answered
        assert holds[0]["command"] == "condor_release 101.0"
        assert holds[4]["command"] == 'condor_rm -reason "jobaware: P(release) 0.010 <= remove_below 0.05" 102.0'
        acted = [r for r in read_records(audit) if r["kind"] == "acted"]
        assert [(a["hold_id"], a["ok"]) for a in acted] == [(holds[i]["id"], True) for i in (0, 4, 5)]
        # its series: every hold a verdict, the acts done and those the rate limit refused, the window it keeps
        value = lambda name, **labels: watch.series.registry.get_sample_value(  # noqa: E731
            name, {"adapter": "htcondor", **labels})
        assert value("jobaware_adapter_verdicts_total") == 8 and value("jobaware_adapter_deferred_total") is None
        assert value("jobaware_adapter_actions_total", action="release", outcome="done") == 1
        assert value("jobaware_adapter_actions_total", action="remove", outcome="done") == 2
        assert value("jobaware_adapter_actions_refused_total", action="remove", reason="rate_limit") == 2
        assert value("jobaware_adapter_passes_total", outcome="ok") == len(RELEASED_TWICE) + len(REMOVED)
        assert value("jobaware_adapter_cache_entries") == 0  # both jobs ended: no live job left in the window
        assert value("jobaware_adapter_cache_bytes") > 1000  # their recent events stay
        assert value("jobaware_adapter_cache_written_timestamp_seconds") > 1.7e9
        # the log the service was asked with: the held job's events up to its hold, in log order
        first = service.requests[0]["log"].encode()
        assert first == b"".join(renumber(RELEASED_TWICE, 101)[:RELEASED_TWICE.index(
            next(e for e in RELEASED_TWICE if e.startswith(b"012 "))) + 1])

        # read again from the start (the position lost): every hold is known, nothing is asked or acted twice
        (tmp_path / "audit.jsonl.state.json").unlink()
        again = HoldAdapter([log], audit, client=DecisionClient(service.url), policy=POLICY, actor=Actor(schedd))
        counts = again.step()
        again.close()
    assert counts.holds == 0 and counts.seen_before == 8 and len(schedd.calls) == 3
    assert len(_holds(audit)) == 8


def test_who_decided_each_hold_is_in_the_stores_audit_stream(tmp_path):
    from jobaware.store import open_store

    log = tmp_path / "EventLog"
    with Answers({101: 0.95}) as service, open_store(str(tmp_path / "store")) as store:
        watch = HoldAdapter([log], None, store=store, client=DecisionClient(service.url), policy=Policy())
        _live(watch, log, renumber(RELEASED_TWICE, 101))
        watch.close()
        holds = [e["record"] for e in store.events("htcondor.holds") if e["record"]["kind"] == "hold"]
    assert [(h["job"], h["decided_by"], h["p_release"]) for h in holds] == [("101.0.0", "pool", 0.95)] * 3


def test_a_backlog_read_at_start_acts_on_no_hold_already_resolved_in_it(tmp_path):
    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    log.write_bytes(b"".join(renumber(RELEASED_TWICE, 101)))
    schedd = RecordedSchedd()
    with Answers({101: 0.99}) as service:
        watch = HoldAdapter([log], audit, client=DecisionClient(service.url), policy=POLICY, actor=Actor(schedd))
        watch.step()
        watch.close()
    assert schedd.calls == []
    assert _holds(audit)[0]["not_acted_because"] == "the hold was already resolved further on in the log"


def test_a_model_trained_on_generated_logs_never_acts(tmp_path):
    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    schedd = RecordedSchedd()
    with Answers({101: 0.99}, source="synthetic") as service:
        watch = HoldAdapter([log], audit, client=DecisionClient(service.url), policy=POLICY, actor=Actor(schedd))
        _live(watch, log, renumber(RELEASED_TWICE, 101))
        watch.close()
        refused = subprocess.run([*ADAPTER, "follow", "--input", str(log), "--audit", str(tmp_path / "a2.jsonl"),
                                  "--service", service.url, "--act", "--once"], capture_output=True, text=True, cwd=ROOT,
                                 timeout=120)
    assert schedd.calls == []
    holds = _holds(audit)
    assert holds[0]["recommended"] == "release" and holds[0]["trained_on"] == {"source": "synthetic",
                                                                               "labelled_holds": 1200}
    assert holds[0]["not_acted_because"] == "the model was not trained on real logs"
    assert refused.returncode == 1, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "--act: the hold model (version 9) was trained on synthetic logs" in " ".join(lines)


def test_with_the_service_down_each_hold_is_recorded_as_no_decision(tmp_path):
    from prometheus_client import CollectorRegistry

    from jobaware import metrics

    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    schedd = RecordedSchedd()
    series = metrics.Group(metrics.ADAPTER, CollectorRegistry())  # the follower's and its client's, as follow has it
    client = DecisionClient(f"http://127.0.0.1:{free_port()}", timeout=1, series=series)
    watch = HoldAdapter([log], audit, client=client, policy=POLICY, actor=Actor(schedd), series=series)
    _live(watch, log, renumber(RELEASED_TWICE, 101))
    watch.close()
    holds = _holds(audit)
    assert len(holds) == 3 and schedd.calls == []
    assert all(h["p_release"] is None and h["action"] == "none" and h["fired"] == "no decision" for h in holds)
    assert holds[0]["no_decision"].startswith("unavailable: ") and "unreachable: ConnectError" in holds[0]["no_decision"]
    assert holds[0]["site_rule"] == "release"  # the site rule's call is recorded all the same
    def value(name, **labels):
        return series.registry.get_sample_value(name, {"adapter": "htcondor", **labels})

    assert value("jobaware_adapter_deferred_total") == 3 and value("jobaware_adapter_verdicts_total") == 3
    assert value("jobaware_adapter_service_backoff", capability="hold") == 1  # failing open, out loud
    assert value("jobaware_adapter_service_unavailable_total", capability="hold") == 3


def test_a_failing_act_is_audited_and_the_follower_goes_on(tmp_path):
    class Refusing(RecordedSchedd):
        def act(self, action, job_spec, reason=None):
            raise htcondor2.HTCondorException("permission denied")

    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    with Answers({101: 0.99}) as service:
        watch = HoldAdapter([log], audit, client=DecisionClient(service.url), policy=POLICY, actor=Actor(Refusing()))
        _live(watch, log, renumber(RELEASED_TWICE, 101))
        watch.close()
    acted = [r for r in read_records(audit) if r["kind"] == "acted"]
    assert len(acted) == 1 and not acted[0]["ok"] and "permission denied" in acted[0]["error"]
    assert len(_holds(audit)) == 3


@pytest.mark.parametrize("text, words", [
    ("release_above: 2\n", "release_above: input should be less than or equal to 1, got 2"),
    ("release_codes: [13, 'x']\n", "release_codes: 'x' is not a hold code"),
    ("release_codes: [13]\nmanual_codes: [13]\n", "hold code 13 is in both release_codes and manual_codes"),
    ("mode: always\n", "mode: input should be 'dry-run' or 'act'"),
    ("acts_per_minute: 1.5\n", "acts_per_minute: input should be a valid integer"),
    ("colour: red\n", "colour: unknown field"),
    ("[1, 2]\n", "expected a mapping of policy fields, got list"),
])
def test_a_bad_policy_file_is_refused_with_one_line_naming_the_field(tmp_path, text, words):
    from jobaware.adapters.htcondor.policy import load_policy
    from jobaware.errors import InputError

    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match="^" + str(path).replace(".", r"\.") + ": ") as error:
        load_policy(path)
    assert words in str(error.value) and "\n" not in str(error.value)


def test_a_toml_policy_and_its_condor_configuration(tmp_path):
    from jobaware.adapters.htcondor.policy import condor_config, load_policy

    path = tmp_path / "policy.toml"
    path.write_text('release_codes = [13, "26/102"]\nremove_codes = [32]\nmanual_codes = [1]\nmax_job_starts = 5\n')
    config = condor_config(load_policy(path))
    assert "SYSTEM_PERIODIC_RELEASE_jobaware_release_codes = JobStatus == 5 && !(HoldReasonCode == 1) && " \
           "(HoldReasonCode == 13 || (HoldReasonCode == 26 && HoldReasonSubCode == 102)) && NumJobStarts < 5 " \
           "&& NumHolds <= 3" in config
    assert "SYSTEM_PERIODIC_REMOVE_NAMES = $(SYSTEM_PERIODIC_REMOVE_NAMES) jobaware_remove_codes " \
           "jobaware_max_job_starts jobaware_max_holds" in config
    assert "SYSTEM_PERIODIC_REMOVE_jobaware_remove_codes = JobStatus == 5 && !(HoldReasonCode == 1) && " \
           "(HoldReasonCode == 32)" in config


def test_decide_asks_about_the_jobs_last_hold_with_the_window_follow_sends(tmp_path):
    from typer.testing import CliRunner

    from jobaware.adapters.htcondor.__main__ import app

    log = CONDOR / "mldag_standalone" / "metl_12636334.log"
    with Answers({12636334: 0.2}) as service:
        result = CliRunner().invoke(app, ["decide", "--input", str(log), "--job", "12636334", "--service", service.url])
        missing = CliRunner().invoke(app, ["decide", "--input", str(log), "--job", "5", "--service", service.url])
    assert result.exit_code == 0, result.output
    assert "12636334.0.0" in result.output and "0.2" in result.output and "real (1200 holds)" in result.output
    sent = service.requests[0]["log"].encode()
    last_hold = max(i for i, e in enumerate(REMOVED) if e.startswith(b"012 "))
    assert sent == REMOVED[0] + b"".join(REMOVED[last_hold + 1 - 200:last_hold + 1])  # the submit + the last 200
    assert missing.exit_code != 0 and "job 5.0.0 has no hold (012 event) in this log" in str(missing.exception)


def test_a_logrotate_copy_of_the_log_repeats_no_hold(tmp_path):
    import shutil

    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    first, second = renumber(RELEASED_TWICE, 101), renumber(RELEASED_TWICE, 102)
    watch = HoldAdapter([log], audit)
    _live(watch, log, first[:120])
    shutil.copy(log, tmp_path / "EventLog.1")  # copytruncate: a copy (a new inode), the log emptied in place
    with open(log, "r+b") as handle:
        handle.truncate(0)
    _live(watch, log, first[120:] + second)
    watch.close()
    holds = _holds(audit)
    assert [h["job"] for h in holds] == ["101.0.0"] * 3 + ["102.0.0"] * 3
    assert len({h["id"] for h in holds}) == 6


def test_a_service_with_a_smaller_body_limit_is_asked_with_a_smaller_window(tmp_path):
    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    with Answers({12636334: 0.3}, max_body=20_000) as service:
        watch = HoldAdapter([log], audit, client=DecisionClient(service.url))
        _live(watch, log, REMOVED)
        watch.close()
    holds = _holds(audit)
    assert all(h["p_release"] == 0.3 and h["no_decision"] is None for h in holds)
    assert max(h["request_bytes"] for h in holds) <= 16 << 10 < 20_000 < sum(map(len, REMOVED))


def test_the_licence_to_act_follows_what_the_model_was_trained_and_measured_on():
    assert trained_on_real({"trained_on": {"source": "mixed", "evaluated_on": "real", "real_holds": 151}})
    assert trained_on_real({"trained_on": {"source": "real"}})  # a model that says nothing of its evaluation
    assert not trained_on_real({"trained_on": {"source": "mixed", "evaluated_on": "generated"}})
    assert not trained_on_real({"trained_on": {"source": "synthetic", "evaluated_on": "generated"}})
    assert not trained_on_real(None) and not trained_on_real({"trained_on": None})
