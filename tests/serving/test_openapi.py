"""Each service's OpenAPI document shows its request body exactly as the slice describes it. BentoML rewrites a
schema on its way into the document (it keeps only the first alternative of an `anyOf` or `allOf` in a field,
and stores bounds as floats): the slices' schemas say alternatives with `oneOf` and keep bounds float-exact."""

from __future__ import annotations

import importlib
import json

import pytest

from jobaware.failure.readers.slurm import request_schema as failure_jobs
from jobaware.hold.service import request_schema as hold_request
from jobaware.resource.service import classify_schema, pairing_schema
from jobaware.similarity.service import job_schema, request_schema as similar_request

SERVICES = {
    "failure": ("FailureService", {"/predict": None}),
    "hold": ("HoldService", {"/hold-decision": None}),
    "resource": ("ResourceService", {"/classify": classify_schema(), "/pairing": pairing_schema()}),
    "similarity": ("SimilarityService", {"/similar": similar_request(), "/job": job_schema()}),
}


def _served(key: str) -> dict[str, dict]:
    module = importlib.import_module(f"serving.{key}")
    document = json.loads(json.dumps(getattr(module, SERVICES[key][0]).openapi_spec.asdict(), default=str))
    return {route: document["paths"][route]["post"]["requestBody"]["content"]["application/json"]["schema"]
            for route in SERVICES[key][1]}, module


@pytest.mark.parametrize("key", list(SERVICES))
def test_the_openapi_document_shows_the_slices_request_schema(key):
    served, module = _served(key)
    expected = dict(SERVICES[key][1])
    if key == "failure":
        jobs = served["/predict"]["properties"]["jobs"]
        assert served["/predict"]["required"] == ["jobs"]
        served = {"/predict": {k: v for k, v in jobs.items() if k not in ("title", "description")}}
        expected["/predict"] = failure_jobs(module.MAX_JOBS)
    if key == "hold":
        expected["/hold-decision"] = hold_request(module.LIMITS)
    for route, schema in expected.items():
        shown = {k: v for k, v in served[route].items() if k != "title"}
        assert shown == schema, f"{key} {route}: the document differs from the slice's schema"
