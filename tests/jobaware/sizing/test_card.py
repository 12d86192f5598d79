"""sizing's card part: the request read from the card's job record (squeue --json or a canonical row), asked of a
real loopback /size answering with a trained bundle, and said in the comment, the card's table and the advice."""

import json

import pytest

from jobaware import card as cards
from jobaware.bodies import parse_body
from jobaware.card import NotApplicable
from jobaware.model import Served
from jobaware.sizing.advice import clock, suggested_time
from jobaware.sizing.card import request_of, words
from jobaware.sizing.service import LIMITS, SizeRequest, size
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
    assert cards.advice(card).startswith("asked 24:00:00; ") and f"--time={time_asked} would do" in cards.advice(card)
    assert unknown["parts"]["sizing"]["note"] == "no history: no recommendation"
    assert cards.table(unknown)[0]["answer"] == "no history: no recommendation" and unknown["short"] == cards.MARK
    assert empty["parts"]["sizing"] == {"status": "not_applicable", "reason": "no job record"}
