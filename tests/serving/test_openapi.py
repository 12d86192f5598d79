"""Each registered service's OpenAPI document shows every request body exactly as the slice's body model states it
(`openapi_schema` of the route's body, `jobaware.serving.base.json_body`), and declares every field's type. BentoML rewrites a schema on its way into the document (it keeps only the first
alternative of an `anyOf` or `allOf` in a field, and stores bounds as floats): the slices' schemas say
alternatives with `oneOf` and keep bounds float-exact, and this test finds any that does not."""

from __future__ import annotations

import importlib
import json

import pytest

from jobaware import capabilities

LOOSE = {"title", "description", "default", "examples"}


def _service(key: str):
    module, _, name = capabilities.get(key).service.partition(":")
    return getattr(importlib.import_module(module), name)


def _bodies(key: str) -> list[tuple[str, dict, dict]]:
    """(route, declared schema, served schema) of each of the service's endpoints."""
    service = _service(key)
    document = json.loads(json.dumps(service.openapi_spec.asdict(), default=str))
    return [(api.route, api.input_spec.document,
             document["paths"][api.route]["post"]["requestBody"]["content"]["application/json"]["schema"])
            for api in service.apis.values()]


def _without_title(schema: dict) -> dict:
    return {k: v for k, v in schema.items() if k != "title"}


@pytest.mark.parametrize("key", capabilities.keys())
def test_the_openapi_document_shows_each_request_schema_as_declared(key):
    bodies = _bodies(key)
    assert bodies, f"{key}: the service has no endpoint"
    for route, declared, served in bodies:
        assert _without_title(served) == _without_title(declared), f"{key} {route}: the document differs from the slice's schema"


@pytest.mark.parametrize("key", capabilities.keys())
def test_every_request_field_has_a_stated_type(key):
    for route, declared, _ in _bodies(key):
        assert declared.get("additionalProperties") is False, f"{key} {route}: unknown fields are not refused"
        for name, field in declared["properties"].items():
            assert set(field) - LOOSE, f"{key} {route}: field '{name}' is typed Any in the document"
