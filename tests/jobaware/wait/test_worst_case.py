"""The most expensive valid `/wait` requests the limits allow are answered within 2 s and 1 MiB."""

import pydantic_core

from harness.worst_cases import check_bounded, wait_cases
from jobaware.bodies import read_json
from jobaware.model import Served
from jobaware.wait.service import WaitRequest, wait


def test_the_worst_requests_are_bounded(trained):
    model = Served(trained[0], "1")

    def answer(body: dict) -> bytes:  # as the service answers it: the JSON read, answered and encoded
        return pydantic_core.to_json(wait(read_json(WaitRequest, pydantic_core.to_json(body)), model))

    over = check_bounded(answer, wait_cases())
    assert not over, over
