import copy
import json

import pytest

from jobaware import card as cards
from jobaware.bodies import parse_body
from jobaware.card import NotApplicable
from jobaware.model import Served
from jobaware.wait.card import answer, duration, shown, words
from jobaware.wait.service import WaitRequest, wait
from tests.conftest import SQUEUE


class Ask:
    """The card's `ask` over the route function itself, keeping the bodies it posted."""

    def __init__(self, bundle):
        self.bundle, self.bodies = bundle, []

    def post(self, route: str, body: dict) -> dict:
        assert route == "/wait"
        self.bodies.append(body)
        return wait(parse_body(WaitRequest, body), Served(self.bundle, "7"))


def _snapshot():
    """The real squeue --json of the test cluster with job 2 running on 8 of its processors: job 3 pending
    (Resources) behind it, job 4 held."""
    records = copy.deepcopy(json.loads(SQUEUE.read_text())["jobs"])
    running = records[1]
    running.update(job_state="RUNNING", start_time=records[1]["submit_time"] + 5, cpus=8, time_limit=120)
    return records


def test_a_pending_job_is_told_when_it_is_likely_to_start_from_the_queue_around_it(trained):
    records = _snapshot()
    ask = Ask(trained[0])
    part = answer({"job_id": 3, "job": records[2], "queue": records}, ask)
    [body] = ask.bodies
    assert [j["job_id"] for j in body["jobs"]] == [3] and [j["job_id"] for j in body["running"]] == [2]
    assert [j["job_id"] for j in body["pending"]] == [3]  # the held job 4 is not ahead of anyone
    assert part["model_version"] == "7" and part["why"] == "nothing ahead; 0 of 8 processors free"
    assert 0 <= part["low_s"] <= part["wait_s"] <= part["high_s"] <= part["bound_s"]
    ok = {"status": "ok", **part}
    said = words(ok, {})
    assert said.startswith("likely to start ") and said.endswith(" (80%)")
    assert shown(ok).endswith(part["why"]) and "(95%)" in shown(ok)


def test_the_part_is_on_the_card_by_its_registration(trained):
    records = _snapshot()
    assert "wait" in cards.declared()
    assert cards.declared()["wait"].answer({"job_id": 3, "job": records[2], "queue": records}, Ask(trained[0]))


@pytest.mark.parametrize("change, reason", [
    (lambda r: r[3], "held (JobHeldUser)"),
    (lambda r: r[0], "not pending (completed)"),
    (lambda r: {k: v for k, v in r[2].items() if k != "job_state"}, "no squeue record of the job"),
])
def test_a_job_that_does_not_wait_for_the_queue_has_no_wait_part(trained, change, reason):
    records = _snapshot()
    with pytest.raises(NotApplicable, match=reason.replace("(", r"\(").replace(")", r"\)")):
        answer({"job_id": 0, "job": change(records), "queue": records}, Ask(trained[0]))
    with pytest.raises(NotApplicable, match="the queue around it is not known"):
        answer({"job_id": 3, "job": records[2], "queue": []}, Ask(trained[0]))


def test_words_for_a_range():
    part = {"status": "ok", "wait_s": 3600.0, "low_s": 2400.0, "high_s": 10800.0, "bound_s": 32400.0, "why": "w"}
    assert words(part, {}) == "likely to start in 40 min - 3 h (80%)"
    assert shown(part) == "start in 40 min - 3 h (80%), within 9 h (95%); w"
    assert words({**part, "low_s": 0.0, "high_s": 30.0}, {}) == "likely to start within 1 min (80%)"
    assert words({**part, "status": "unavailable"}, {}) is None
    assert [duration(s) for s in (45, 2400, 9000, 46800, 3 * 86400, 30 * 86400)] == [
        "45 s", "40 min", "2.5 h", "13 h", "3 days", "30 days"]
