"""Generated requests that reach the model: event logs built by Hypothesis around a held job (its own life and
other jobs' events, both date styles, any hold code, reason and host), each answered with a decision.

The OpenAPI fuzz of the service cannot get here: a body valid by the document is a string, almost never an
event log in which the job is on hold. `make fuzz` runs `JOBAWARE_FUZZ_EXAMPLES` of these."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from jobaware.bodies import parse_body
from jobaware.hold.service import Limits, checked, decide, request_model
from tests.fuzzing import examples, fuzz_settings

HOLD_CODES = [1, 3, 6, 7, 12, 13, 16, 21, 26, 30, 32, 34, 35, 43, 46, 47]  # common HTCondor hold codes
_TEXT = st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp"))
REASONS = st.text(_TEXT, min_size=1, max_size=120).filter(lambda s: s.strip() and not s.strip().startswith("..."))


def _address(n: int) -> str:
    return f"<10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}:9618?addrs=10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}-9618>"


@st.composite
def _event(draw, last_of_held: bool = False) -> tuple[int, str, str]:
    """(code, header text, body) of one event; the held job's last event is its hold."""
    if last_of_held:
        kind = 12
    else:
        kind = draw(st.sampled_from([0, 1, 6, 4, 5, 9, 12, 13, 22, 23, 28, 40]))
    number = draw(st.integers(0, 2**31 - 1))
    if kind == 0:
        return 0, f"Job submitted from host: {_address(number)}", ""
    if kind == 1:
        return 1, f"Job executing on host: {_address(number)}", ""
    if kind == 6:
        return 6, f"Image size of job updated: {number}", f"\t{number >> 10}  -  MemoryUsage of job (MB)\n"
    if kind == 4:
        return 4, f"Job was evicted. Code {draw(st.sampled_from([1005, 1013]))} Subcode 0", "\tReason: preempted\n"
    if kind == 5:
        ending = draw(st.sampled_from([f"(1) Normal termination (return value {number % 256})",
                                       f"(0) Abnormal termination (signal {number % 64})"]))
        return 5, "Job terminated.", f"\t{ending}\n"
    if kind == 9:
        return 9, "Job was aborted.", f"\t{draw(REASONS)}\n"
    if kind == 12:
        code = draw(st.one_of(st.sampled_from(HOLD_CODES), st.integers(0, 2**31 - 1)))
        subcode = draw(st.one_of(st.just(0), st.integers(0, 2**31 - 1)))
        return 12, "Job was held.", f"\t{draw(REASONS)}\n\tCode {code} Subcode {subcode}\n"
    if kind == 13:
        return 13, "Job was released.", f"\t{draw(REASONS)}\n"
    if kind == 22:
        return 22, "Job disconnected, attempting to reconnect", ""
    if kind == 23:
        return 23, "Job reconnected to slot1_1@node", ""
    if kind == 28:
        return 28, "Job ad information event triggered.", f'Owner = "u{number % 50}"\nRequestMemory = {number % 10**6}\n'
    return 40, "Started transferring input files", ""


@st.composite
def held_job_logs(draw) -> tuple[int, int, str, dict]:
    """(cluster, proc, the event log as text, what its last hold says): the held job and 0-5 others, events in
    time order, ISO dates (with or without `T`) or HTCondor's year-less `MM/DD` ones."""
    jobs = draw(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 999)), min_size=1, max_size=6, unique=True))
    start = datetime(draw(st.integers(2000, 2035)), 3, 1)  # March to October: a year-less log never meets Feb 29
    start += timedelta(seconds=draw(st.integers(0, 214 * 86400)))
    style = draw(st.sampled_from(["%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%m/%d %H:%M:%S"]))
    timeline = []
    for index, (cluster, proc) in enumerate(jobs):
        events = draw(st.lists(_event(), max_size=8))
        if index == 0:  # the held job
            events.append(draw(_event(last_of_held=True)))
        at = start
        for code, text, body in events:
            at += timedelta(seconds=draw(st.integers(0, 7 * 86400)))
            timeline.append((at, index, code, text, body, cluster, proc))
    timeline.sort(key=lambda event: (event[0], event[1] != 0))  # the held job's hold stays its last event
    held = [event for event in timeline if event[1] == 0][-1]
    log = "".join(f"{code:03d} ({cluster}.{proc:03d}.000) {at.strftime(style)} {text}\n{body}...\n"
                  for at, _, code, text, body, cluster, proc in timeline)
    reason, codes = held[4].split("\n")[:2]
    code, subcode = (int(word) for word in codes.split()[1::2])
    return *jobs[0], log, {"reason": reason[1:], "code": code, "subcode": subcode}


def test_every_generated_log_of_a_held_job_gets_a_decision(trained):
    bundle = trained[0]

    @fuzz_settings(examples(40))
    @given(case=held_job_logs())
    def check(case):
        cluster, proc, log, hold = case
        body = parse_body(request_model(Limits()), {"cluster": cluster, "proc": proc, "log": log})
        answer = decide(bundle, checked(body, Limits()), "1")
        json.dumps(answer, allow_nan=False)
        assert (answer["cluster"], answer["proc"]) == (cluster, proc)
        assert (answer["hold_code"], answer["hold_subcode"]) == (hold["code"], hold["subcode"])
        assert answer["hold_reason_text"].strip() == hold["reason"].strip()
        assert answer["p_release"] is not None and 0 <= answer["p_release"] <= 1 and math.isfinite(answer["threshold"])
        assert answer["decision"] == ("remove" if answer["p_release"] < answer["threshold"] else "release")

    check()
