"""The most expensive valid `/predict` request the limits allow is answered within 2 s and 1 MiB."""

from jobaware import tracking
from serving.failure import FailureService
from tests.serving.worst_cases import check_bounded, failure_cases


def test_the_worst_request_is_bounded(champion):
    bundle, version = tracking.load_bundle("failure", champion)
    over = check_bounded(lambda body: FailureService.inner._answer(bundle, version, None, body["jobs"]).body,
                         failure_cases())
    assert not over, over
