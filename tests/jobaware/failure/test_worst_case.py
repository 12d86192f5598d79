"""The most expensive valid `/predict` request the limits allow is answered within 2 s and 1 MiB."""

import json

import pydantic_core

from harness.worst_cases import check_bounded, failure_cases
from jobaware import tracking
from jobaware.bodies import read_json
from jobaware.failure.service import PredictRequest, predict
from jobaware.model import Served


def test_the_worst_request_is_bounded(champion):
    model = Served(*tracking.load_bundle("failure", champion))

    def answer(body: dict) -> bytes:  # as the service answers it: the JSON read, answered and encoded
        return pydantic_core.to_json(predict(read_json(PredictRequest, json.dumps(body)), model))

    over = check_bounded(answer, failure_cases())
    assert not over, over
