"""The rate limit on acts and the back-off per service, on a clock the tests move."""

from jobaware.adapters.common.pacing import Backoff, RateLimit


def test_the_rate_limit_takes_all_of_a_verdicts_acts_or_none():
    now = [0.0]
    rate = RateLimit(3, clock=lambda: now[0])
    assert rate.take(2) and not rate.take(2) and rate.take(1) and not rate.take()
    now[0] = 59.9
    assert not rate.take()
    now[0] = 60.0
    assert rate.take(3)


def test_backoff_doubles_up_to_its_cap_and_an_answer_ends_it_with_the_outages_length():
    now = [0.0]
    backoff = Backoff(5, 12, clock=lambda: now[0])
    assert backoff.ok("failure") is None  # no outage to end
    assert backoff.failed("failure") == 5 and not backoff.open("failure") and backoff.left("failure") == 5
    now[0] = 5.0
    assert backoff.open("failure")
    assert backoff.failed("failure") == 10 and backoff.failed("failure") == 12  # capped
    assert backoff.open("resource")  # one back-off per service
    now[0] = 8.0
    assert backoff.ok("failure") == 8.0 and backoff.open("failure") and "failure" not in backoff.delay
