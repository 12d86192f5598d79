"""The most expensive valid `/hold-decision` requests the limits allow are answered within 2 s and 1 MiB."""

from harness.worst_cases import check_bounded, hold_cases
from jobaware.bodies import parse_body
from jobaware.hold.service import LIMITS, MAX_REASON_CHARS, HoldRequest, checked, decide


def parse_request(body, limits):
    return checked(parse_body(HoldRequest, body), limits)


def test_the_worst_requests_are_bounded(trained):
    bundle = trained[0]
    over = check_bounded(lambda body: decide(bundle, parse_request(body, LIMITS), "1"), hold_cases())
    assert not over, over


def test_a_long_reason_is_echoed_cut_with_a_marker(trained):
    _, body = hold_cases()["hold-decision: log at the limit, one long reason"]
    answer = decide(trained[0], parse_request(body, LIMITS), "1")
    text = answer["hold_reason_text"]
    assert len(text) == MAX_REASON_CHARS and text.startswith("RRR") and text.endswith(" characters in all]")
