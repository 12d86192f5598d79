"""The most expensive valid `/size` request the limits allow is answered within 2 s and 1 MiB."""

import pydantic_core

from harness.worst_cases import check_bounded, sizing_cases
from jobaware.bodies import read_json
from jobaware.model import Served
from jobaware.sizing.service import SizeRequest, size


def test_the_worst_request_is_bounded(trained):
    model = Served(trained[0], "1")

    def answer(body: dict) -> bytes:  # as the service answers it: the JSON read, answered and encoded
        return pydantic_core.to_json(size(read_json(SizeRequest, pydantic_core.to_json(body)), model))

    over = check_bounded(answer, sizing_cases())
    assert not over, over
