"""`POST /hold-decision` logic: bounded, checked requests; decisions as plain JSON; bad input named."""

from __future__ import annotations

import json
import os

import pytest

from jobaware.bodies import parse_body
from jobaware.errors import InputError, JobawareError
from jobaware.hold.service import Limits, checked, decide, hold_decision, request_model
from jobaware.model import Served
from tests.jobaware.hold.conftest import STANDALONE

LOG = (STANDALONE / "metl_12634462.log").read_text()
HELD = LOG[:LOG.index("013 (12634462.000.000) 2025-04-22")]  # the log up to its second hold


def parse_request(payload, limits: Limits):
    """A body as the service reads it: its model under `limits`, then the checks beyond it."""
    return checked(parse_body(request_model(limits), payload), limits)


def test_a_held_job_gets_its_decision_as_plain_json(trained):
    request = parse_request({"cluster": 12634462, "proc": 0, "log": HELD}, Limits())
    answer = decide(trained[0], request, "7")
    json.dumps(answer, allow_nan=False)
    assert answer["hold_time"] == "2025-04-22 04:40:47" and (answer["hold_code"], answer["hold_subcode"]) == (47, 0)
    assert answer["hold_reason"].startswith("47 JobExecuteExceeded")
    assert answer["hold_reason_text"] == "The job exceeded allowed execute duration of 20:00:00"
    assert 0 <= answer["p_release"] <= 1 and answer["model_version"] == "7"
    assert answer["trained_on"]["source"] == "synthetic" and answer["trained_on"]["labelled_holds"] > 100
    assert answer["decision"] == ("remove" if answer["p_release"] < answer["threshold"] else "release")
    assert answer["fit"] == []  # no training profile given: nothing to compare with
    trained_on = {"kind": "synthetic", "tables": {"condor_events": {"rows": 900, "columns": {"code": [1, 20, 40]}}}}
    body = parse_body(request_model(Limits()), {"cluster": 12634462, "proc": 0, "log": HELD})
    flags = hold_decision(body, Served(trained[0], "7", trained_on), Limits())["fit"]
    assert flags[0].startswith("model version 7 was trained on synthetic data")
    assert len(flags) == 2 and flags[1].startswith("code: 1 of ")  # the hold code 47, in a log of many events
    assert flags[1].endswith(" outside the training range 1..40")


def test_a_path_is_read_only_inside_the_log_folder(trained, tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "EventLog").write_text(HELD)
    (tmp_path / "secret.log").write_text(HELD)
    os.symlink(tmp_path / "secret.log", tmp_path / "logs" / "escape.log")
    limits = Limits(log_dir=tmp_path / "logs")
    answer = decide(trained[0], parse_request({"cluster": 12634462, "proc": 0, "path": "EventLog"}, limits), "1")
    assert answer["hold_code"] == 47
    for path in ("../secret.log", "escape.log", str(tmp_path / "secret.log")):
        with pytest.raises(InputError, match="^path: .*outside the service's log folder"):
            parse_request({"cluster": 1, "proc": 0, "path": path}, limits)
    with pytest.raises(InputError, match="^path: .*not a file"):
        parse_request({"cluster": 1, "proc": 0, "path": "nothing"}, limits)
    with pytest.raises(InputError, match="^path: this service reads no log files .*JOBAWARE_HOLD_LOG_DIR"):
        parse_request({"cluster": 1, "proc": 0, "path": "EventLog"}, Limits(log_dir=None))


@pytest.mark.parametrize("payload, words", [
    ([1], r"^body: expected an object"),
    ({"cluster": 1, "proc": 0, "log": "x", "user": "me"}, "^user: unknown field"),
    ({"proc": 0, "log": "x"}, "^cluster: field required"),
    ({"cluster": -1, "proc": 0, "log": "x"}, r"^cluster: input should be greater than or equal to 0, got -1"),
    ({"cluster": 1, "proc": True, "log": "x"}, "^proc: input should be a valid integer, got True"),
    ({"cluster": 1, "proc": 2**40, "log": "x"}, "^proc: input should be less than or equal to 2147483647"),
    ({"cluster": 1, "proc": 0}, "^log: give the event-log text"),
    ({"cluster": 1, "proc": 0, "log": 5}, "^log: input should be a valid string, got 5"),
    ({"cluster": 1, "proc": 0, "log": "x" * 2000}, "^log: string should have at most 1000 characters"),
    ({"cluster": 1, "proc": 0, "log": "é" * 600}, "^log: 1,200 bytes, more than the limit of 1,000"),
    ({"cluster": 1, "proc": 0, "path": "p"}, "^path: this service reads no log files"),
])
def test_bad_requests_are_refused_naming_the_field(payload, words):
    with pytest.raises(InputError, match=words):
        parse_request(payload, Limits(log_dir=None, max_log_bytes=1000))


@pytest.mark.parametrize("cluster, log, words", [
    (99, HELD, "^cluster: job 99.0.0 has no event in the log"),
    (12634462, LOG, "^cluster: job 12634462.0.0 is not on hold: its last event is 005 JOB_TERMINATED"),
    (12634462, HELD + "012 (12634462.000.000) 2025-04-22 99:00:00 Job was held.\n...\n",
     rf"^log: 1 bad record\(s\); the first at line {HELD.count(chr(10)) + 1}: header: no such date"),
    (12634462, "not a log\n", "^log: 1 bad record"),
])
def test_unknown_jobs_jobs_not_held_and_bad_logs_are_refused(trained, cluster, log, words):
    request = parse_request({"cluster": cluster, "proc": 0, "log": log}, Limits())
    with pytest.raises(InputError, match=words):
        decide(trained[0], request, "1")


def test_limits_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("JOBAWARE_HOLD_LOG_DIR", str(tmp_path))
    monkeypatch.setenv("JOBAWARE_HOLD_MAX_LOG_BYTES", "1234")
    assert Limits.load() == Limits(log_dir=tmp_path, max_log_bytes=1234)
    monkeypatch.delenv("JOBAWARE_HOLD_LOG_DIR")
    assert Limits.load().log_dir is None
    monkeypatch.setenv("JOBAWARE_HOLD_MAX_LOG_BYTES", "lots")
    with pytest.raises(JobawareError, match="^JOBAWARE_HOLD_MAX_LOG_BYTES: input should be a valid integer"):
        Limits.load()


def test_the_request_model_states_the_rules_across_its_fields(tmp_path):
    """What the OpenAPI document shows (the model's own schema) states the one source of a log, and a `path` only
    where the service reads log files; bodies it calls invalid are refused naming the field."""
    from jsonschema_rs import Draft4Validator

    from jobaware.bodies import openapi_schema

    limits = Limits(log_dir=tmp_path, max_log_bytes=1000)
    schema = openapi_schema(request_model(limits))
    assert "path" not in openapi_schema(request_model(Limits(log_dir=None)))["properties"], "a service without a log folder reads no path"
    validator = Draft4Validator(schema)
    assert validator.is_valid({"cluster": 1, "proc": 0, "path": "EventLog"})
    for body, words in [({"proc": 0, "log": "x"}, "^cluster: field required"), ({"cluster": 1, "proc": 0}, "^log: give exactly one"),
                        ({"cluster": 1, "proc": 0, "log": "x", "path": "p"}, "^log: give exactly one"),
                        ({"cluster": 1, "proc": 0, "log": "x", "user": "me"}, "^user: unknown field")]:
        assert not validator.is_valid(body)
        with pytest.raises(InputError, match=words):
            parse_request(body, limits)


def test_the_answer_says_who_decided_why_and_what_drove_it(real_trained):
    bundle = real_trained[0]
    answer = decide(bundle, parse_request({"cluster": 12634462, "proc": 0, "log": HELD}, Limits()), "3")
    assert answer["decided_by"] == bundle.decided_by and answer["why"] == bundle.why
    assert answer["why"].startswith(f"{bundle.decided_by} (") and "real ended holds" in answer["why"]
    assert answer["reasons"].startswith("hold 47/0 (47 JobExecuteExceeded") and "real holds of 47/0" in answer["reasons"]
    assert "this log's earlier holds of other jobs: 0 ended released, 0 removed, 0 released not yet" in answer["reasons"]
    assert answer["threshold"] == 0.25  # a wrong removal weighs three wrong releases
    assert answer["trained_on"]["evaluated_on"] == "real" and answer["trained_on"]["source"] == "mixed"
    if bundle.decided_by == "remove_all":
        assert (answer["p_release"], answer["decision"]) == (0.0, "remove")
