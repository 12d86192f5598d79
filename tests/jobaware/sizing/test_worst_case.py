"""The most expensive valid `/size` request the limits allow is answered within 2 s and 1 MiB."""

from harness.worst_cases import check_bounded, sizing_cases
from tests.jobaware.sizing.test_service import size_request


def test_the_worst_request_is_bounded(trained):
    over = check_bounded(lambda body: size_request(body, trained[0], "1"), sizing_cases())
    assert not over, over
