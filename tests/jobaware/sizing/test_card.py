"""sizing's card part: the request read from the card's job record (squeue --json or a canonical row), asked of a
real loopback /size answering with a trained bundle, and said in the comment, the card's table and the advice; how
much sooner the suggested time would start, from `wait`'s part asked over a loopback /wait that takes wait's real
request body, and nothing of waiting where `wait` is off, down or not registered."""

import copy
import json
import math

import pytest

from jobaware import capabilities
from jobaware import card as cards
from jobaware.bodies import parse_body
from jobaware.card import NotApplicable
from jobaware.model import Served
from jobaware.sizing.advice import clock, hours, suggested_time
from jobaware.sizing.card import request_of, shorter_record, waits, words
from jobaware.sizing.service import LIMITS, SizeRequest, size
from jobaware.wait.service import WaitRequest
from tests.conftest import SQUEUE
from tests.loopback import JsonServer

SQUEUE_JOB = {"job_id": 42, "user_name": "user5", "account": "a", "partition": "p", "name": "run", "cpus": 4,
              "node_count": 1, "time_limit": {"set": True, "infinite": False, "number": 1440},
              "memory_per_cpu": {"set": False, "number": 0}, "memory_per_node": 16384, "submit_time": 1795371680}


def test_the_request_is_read_from_an_squeue_record_or_a_canonical_row():
    assert request_of(SQUEUE_JOB) == {"job_id": 42, "user": "user5", "group": "a", "name": "run", "queue": "p",
                                      "procs": 4, "time_asked_s": 86400.0, "mem_asked_per_cpu_mb": 4096.0,
                                      "submit_time": 1795371680.0}
    row = {"job_id": 7, "user": "user1", "account": None, "partition": "p", "processors_req": 8,
           "wallclock_req": 7200.0, "mem_req": 8192.0, "submit_time": None}
    assert request_of(row) == {"job_id": 7, "user": "user1", "queue": "p", "procs": 8, "time_asked_s": 7200.0,
                               "mem_asked_per_cpu_mb": 1024.0}
    captured = json.loads(SQUEUE.read_text())["jobs"][0]  # Slurm 22.05: plain numbers, no memory stated
    assert request_of(captured)["time_asked_s"] == 60.0 and "mem_asked_per_cpu_mb" not in request_of(captured)
    with pytest.raises(NotApplicable, match="no user"):
        request_of({"time_limit": 10})
    # every request read is a body /size takes
    parse_body(SizeRequest, {"jobs": [request_of(SQUEUE_JOB), request_of(row), request_of(captured)]})


@pytest.mark.parametrize("unlimited", [4294967295, 4294967294])
def test_a_time_limit_slurm_22_05_writes_for_no_limit_is_no_time_asked(trained, unlimited):
    """Slurm 22.05 writes a job without a time limit as the raw 32-bit INFINITE (NO_VAL when unset): no time
    asked, so the part answers for memory alone; it was read as 8,000 years, which /size refused (no part)."""
    request = request_of({**SQUEUE_JOB, "time_limit": unlimited})
    assert "time_asked_s" not in request and request["mem_asked_per_cpu_mb"] == 4096.0
    with JsonServer(_sized(trained[0])) as server, cards.Services({"sizing": server.url}) as services:
        card = cards.make_card({"job_id": 42, "job": {**SQUEUE_JOB, "time_limit": unlimited}}, services,
                               keys=["sizing"])
    part = card["parts"]["sizing"]
    assert part["status"] == "ok" and "time_asked_s" not in part and part["mem_per_cpu_mb"] < 4096
    assert card["short"].startswith(f"{cards.MARK}ask --mem-per-cpu=") and "--time" not in card["short"]


def test_the_words_name_only_what_is_smaller_than_asked():
    part = {"status": "ok", "time_s": 11_400, "time_asked_s": 86_400.0, "mem_per_cpu_mb": 2389.2,
            "mem_asked_per_cpu_mb": 4096.0, "coverage": 0.95}
    assert words(part, {}) == "ask --time=3:30:00 --mem-per-cpu=2390M (asked 24:00:00, 4096M)"
    assert words({**part, "mem_per_cpu_mb": 4096.0}, {}) == "ask --time=3:30:00 (asked 24:00:00)"
    assert words({**part, "time_s": 86_400}, {}) == "ask --mem-per-cpu=2390M (asked 4096M)"
    assert words({**part, "time_s": 86_400, "mem_per_cpu_mb": None}, {}) is None
    assert words({"status": "unavailable", "reason": "down"}, {}) is None


def test_the_card_asks_a_real_size_service_and_says_it(trained):
    bundle = trained[0]
    bodies = []

    def answer(method, path, body):
        bodies.append(body)
        return 200, size(parse_body(SizeRequest, body), Served(bundle, "5"), LIMITS)

    with JsonServer(answer) as server, cards.Services({"sizing": server.url}) as services:
        card = cards.make_card({"job_id": 42, "job": SQUEUE_JOB}, services, keys=["sizing"])
        unknown = cards.make_card({"job_id": 43, "job": {**SQUEUE_JOB, "user_name": "never-seen"}}, services,
                                  keys=["sizing"])
        empty = cards.make_card({"job_id": 44}, services, keys=["sizing"])
    assert bodies[0] == {"jobs": [request_of(SQUEUE_JOB)]}
    part = card["parts"]["sizing"]
    assert part["status"] == "ok" and part["model_version"] == "5" and part["time_asked_s"] == 86_400
    assert 0 < part["time_s"] <= 86_400 and part["coverage"] == 0.95
    # user5's jobs of the generated trace run well within their limits: a smaller time and memory, said alike in
    # the comment, the card's table and the advice at sbatch
    time_asked = clock(suggested_time(part["time_s"], 86_400))
    assert part["time_s"] < 86_400 and part["mem_per_cpu_mb"] < 4096
    assert card["short"] == (f"{cards.MARK}ask --time={time_asked} --mem-per-cpu={part['mem_per_cpu_mb']}M "
                             "(asked 24:00:00, 4096M)")
    assert cards.table(card)[0]["answer"].startswith(f"fits --time={time_asked} (")
    assert cards.advice(card).startswith("jobs like this asking 24:00:00: ") and f"--time={time_asked} would do" in cards.advice(card)
    assert unknown["parts"]["sizing"]["note"] == "no history: no recommendation"
    assert cards.table(unknown)[0]["answer"] == "no history: no recommendation" and unknown["short"] == cards.MARK
    assert empty["parts"]["sizing"] == {"status": "not_applicable", "reason": "no job record"}


# ---------------------------------------------------------------- how much sooner, from wait's part
def _pending():
    """The captured squeue --json with job 3 pending (Resources) as user5 asking 4 CPUs for a day, 16 GB a node."""
    records = copy.deepcopy(json.loads(SQUEUE.read_text())["jobs"])
    records[2].update(user_name="user5", account="a", partition="p", name="run", cpus=4, time_limit=1440,
                      memory_per_node=16384)
    return records


def _sized(bundle):
    def answer(method, path, body):
        return 200, size(parse_body(SizeRequest, body), Served(bundle, "5"), LIMITS)
    return answer


def _waiting(method, path, body):
    """A /wait that takes wait's real request body and expects a quarter of the time asked (a backfilling queue
    starts shorter jobs sooner)."""
    parse_body(WaitRequest, body)
    return 200, {"model_version": "3", "fit": [], "predictions": [
        {"job_id": job["job_id"], "wait_s": job["wallclock_req"] / 4, "wait_low_s": 0.0,
         "wait_high_s": job["wallclock_req"] / 2, "wait_bound_s": job["wallclock_req"], "reason": "1 job ahead"}
        for job in body["jobs"]]}


def test_the_card_says_how_much_sooner_the_suggested_time_would_start(trained):
    records = _pending()
    context = {"job_id": 3, "job": records[2], "queue": records}
    with JsonServer(_sized(trained[0])) as sizing, JsonServer(_waiting) as wait, \
            cards.Services({"sizing": sizing.url, "wait": wait.url}) as services:
        card = cards.make_card(context, services, keys=["sizing", "wait"])
    part = card["parts"]["sizing"]
    suggested = suggested_time(part["time_s"], 86_400)
    # wait was asked three times: by sizing's part about the job as asked and as suggested, then for its own part
    asked = [body["jobs"][0]["wallclock_req"] for _, _, body in wait.requests]
    assert asked == [86_400, suggested, 86_400] and card["parts"]["wait"]["status"] == "ok"
    assert (part["wait_asked_s"], part["wait_recommended_s"]) == (21_600, suggested / 4)
    gained = hours(21_600 - suggested / 4)
    assert card["short"].startswith(f"{cards.MARK}ask --time={clock(suggested)} --mem-per-cpu=")
    assert f"(asked 24:00:00, 4096M): likely starts {gained} sooner; likely to start " in card["short"]
    assert cards.table(card)[0]["answer"].endswith(f": likely starts {gained} sooner")
    assert f"; --time={clock(suggested)} would likely start {gained} sooner " in cards.advice(card) + " "


def _down(method, path, body):
    return 503, {"error": "starting"}


@pytest.mark.parametrize("how", ["off", "down", "not registered"])
def test_without_a_wait_part_that_answers_sizing_says_its_own_words(trained, how, monkeypatch):
    records = _pending()
    context = {"job_id": 3, "job": records[2], "queue": records}
    if how == "not registered":
        real = capabilities.registry()
        monkeypatch.setattr(capabilities, "registry", lambda: {k: v for k, v in real.items() if k != "wait"})
    with JsonServer(_sized(trained[0])) as sizing, JsonServer(_down) as wait:
        urls = {"sizing": sizing.url, **({"wait": wait.url} if how == "down" else {})}
        with cards.Services(urls) as services:
            card = cards.make_card(context, services, keys=["sizing"])
            alone = cards.make_card(context, cards.Services({"sizing": sizing.url}), keys=["sizing"])
    part = card["parts"]["sizing"]
    assert part["status"] == "ok" and "wait_asked_s" not in part and "sooner" not in card["short"]
    assert card["short"] == alone["short"] and cards.advice(card).endswith(" would do")
    assert len(wait.requests) == (1 if how == "down" else 0)  # down: asked once, then nothing more


class Ask:
    """The card's `ask` with `wait`'s part answered from a table (the status, the wait and the version by the
    time asked, in minutes)."""

    def __init__(self, by_minutes: dict):
        self.by_minutes, self.asked = by_minutes, []

    def part(self, key, context):
        minutes = context["job"]["time_limit"]
        minutes = minutes["number"] if isinstance(minutes, dict) else minutes
        self.asked.append((key, minutes))
        return self.by_minutes[minutes]


def test_the_waits_come_from_one_model_version_for_an_squeue_record_only():
    row = {"time_s": 11_400, "time_asked_s": 86_400.0}
    record = {"job_id": 42, "user_name": "u", "time_limit": 1440}
    ok = {1440: {"status": "ok", "wait_s": 9_000.0, "model_version": "3"},
          210: {"status": "ok", "wait_s": 600.0, "model_version": "3"}}
    ask = Ask(ok)
    assert waits({"job": record}, row, ask) == {"wait_asked_s": 9_000.0, "wait_recommended_s": 600.0}
    assert ask.asked == [("wait", 1440), ("wait", 210)]
    assert waits({"job": record}, row, Ask({**ok, 210: {**ok[210], "model_version": "4"}})) == {}  # a new model
    assert waits({"job": record}, row, Ask({**ok, 1440: {"status": "not_applicable"}})) == {}
    assert waits({"job": record}, {**row, "time_s": 86_400}, Ask(ok)) == {}  # nothing shorter to ask about
    assert waits({"job": {"user": "u", "wallclock_req": 86_400}}, row, Ask(ok)) == {}  # a canonical row
    assert shorter_record(SQUEUE_JOB, 12_600)["time_limit"] == {"set": True, "infinite": False, "number": 210}
    assert shorter_record(record, 12_590)["time_limit"] == 210


# ---------------------------------------------------------------- failure's TIMEOUT and OUT_OF_MEMORY advice
def _predicting(likely: str, p_fail: float = 0.8):
    """failure's /predict: the job flagged at P(fail) `p_fail`, `likely` its most likely failure."""
    def answer(method, path, body):
        return 200, {"model_version": "7", "predictions": [{
            "job_id": body["jobs"][0]["job_id"], "p_fail": p_fail, "most_likely_failure": likely,
            "likely_fail": p_fail >= 0.3, "threshold": 0.3}]}
    return answer


@pytest.mark.parametrize("likely, remedy", [
    ("TIMEOUT", "check that it makes progress: "), ("OUT_OF_MEMORY", "ask for --mem-per-cpu={mem}M: ")])
def test_failures_advice_gives_sizings_values_instead_of_a_direction(trained, likely, remedy):
    records = _pending()
    context = {"job_id": 3, "job": records[2], "queue": records}
    with JsonServer(_sized(trained[0])) as sizing, JsonServer(_predicting(likely)) as failure:
        with cards.Services({"sizing": sizing.url, "failure": failure.url}) as services:
            card = cards.make_card(context, services, keys=["failure", "sizing"])
        with cards.Services({"failure": failure.url}) as services:  # no sizing service: the direction stays
            alone = cards.make_card(context, services, keys=["failure"])
        with JsonServer(_predicting("NODE_FAIL")) as node_fail, \
                cards.Services({"sizing": sizing.url, "failure": node_fail.url}) as services:
            asked_before = len(sizing.requests)
            other = cards.make_card(context, services, keys=["failure"])
            assert len(sizing.requests) == asked_before  # sizing has no values for a node failing: not asked
    sized, flagged = card["parts"]["sizing"], card["parts"]["failure"]
    expected = remedy.format(time=clock(suggested_time(sized["time_s"], 86_400)), mem=math.ceil(sized["mem_per_cpu_mb"]))
    assert flagged["remedy"] == sized["remedies"][likely] and flagged["remedy"].startswith(expected)
    assert cards.advice(card).startswith(f"failure risk 80%, {likely} likely; {flagged['remedy']} (model 7). ")
    assert "remedy" not in alone["parts"]["failure"] and "; ask for more --" in cards.advice(alone)
    assert "remedy" not in other["parts"]["failure"] and "add --requeue" in cards.advice(other)


def test_a_verdict_cached_for_cli_filter_carries_the_values(tmp_path):
    from jobaware.adapters.slurm.adapter import Policy, cached_verdicts, verdict_name
    from jobaware.store import JobKey, open_store

    store = open_store(str(tmp_path / "store"))
    key = JobKey("c", 10, 1_795_371_680)
    store.put_job(key, {"user": "alice", "account": "chem", "partition": "debug", "wallclock_req": 86_400.0,
                        "nodes_req": 1, "processors_req": 4, "mem_req": 16_384.0, "gpus_req": 0})
    remedy = ("check that it makes progress: 92 % of jobs like this ended within 3:10:00 (asked 24:00:00), so "
              "running out of time is more likely a hang than too short a limit")
    card = {"created": 1_795_371_690, "parts": {"failure": {
        "status": "ok", "p_fail": 0.8, "likely": "TIMEOUT", "threshold": 0.3, "likely_fail": True,
        "model_version": "7", "remedy": remedy}}}
    store.put_prediction(key, verdict_name({"failure": "7"}), {"card": card, "acts": []})
    [verdict] = cached_verdicts(store, "c", Policy(), now=1_795_371_700)
    store.close()
    assert verdict.advice == f"failure risk 80%, TIMEOUT likely; {remedy} (model 7)."
