"""Request bodies and service limits declared once: a slice's pydantic model both checks a body and describes it
(the service's OpenAPI document shows `openapi_schema(model)`). A refusal is one InputError line led by the field's
JSON path; a value over a length bound is a TooLargeError (the service answers 413). A slice's `Limits` (what its
service accepts) are read from `JOBAWARE_<KEY>_<FIELD>` environment variables, else their defaults."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

import pydantic_core
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import core_schema
from pydantic_settings import BaseSettings, SettingsConfigDict

from jobaware.errors import InputError, JobawareError, TooLargeError, one_line

M = TypeVar("M", bound=BaseModel)
OVER_A_BOUND = {"too_long", "string_too_long"}


class Body(BaseModel):
    """A request body: unknown fields refused, no type coerced, no NaN or infinity."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class Limits(BaseSettings):
    """What a service accepts. A slice subclasses it with `env_prefix="JOBAWARE_<KEY>_"`: each field is read from
    `JOBAWARE_<KEY>_<FIELD>` (upper case), else its default; `load()` refuses a bad value in one line naming the
    variable."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True)

    @classmethod
    def load(cls) -> Limits:
        try:
            return cls()
        except ValidationError as exc:
            prefix = cls.model_config.get("env_prefix", "")
            error = exc.errors(include_url=False)[0]
            name = f"{prefix}{error['loc'][0]}".upper() if error["loc"] else prefix.rstrip("_")
            raise JobawareError(f"{name}: {one_line(exc).split(': ', 1)[-1]}") from None


def parse_body(model: type[M], payload: Any) -> M:
    """`payload` (parsed JSON) as `model`; errors as one line naming the field."""
    if not isinstance(payload, dict):
        raise InputError(f"body: expected an object, got {type(payload).__name__}")
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        over = exc.errors(include_url=False)[0]["type"] in OVER_A_BOUND
        raise (TooLargeError if over else InputError)(one_line(exc)) from None
    except InputError:  # a field read by a parser of its own (failure's jobs) stopped first: name an unknown field
        known = {field.alias or name for name, field in model.model_fields.items()}
        unknown = [name for name in payload if name not in known]
        if unknown and model.model_config.get("extra") == "forbid":
            raise InputError(f"{str(unknown[0])[:100]}: unknown field") from None
        raise


def read_json(model: type[M], raw: bytes | str | None) -> M:
    """A request body (JSON text; empty is `{}`) as `model`: read once, a top-level field given as null taken as not
    given; errors as for `parse_body`, text that is not JSON named as such."""
    try:
        payload = pydantic_core.from_json(raw or b"{}")
    except ValueError as exc:
        raise InputError(f"body: not valid JSON ({str(exc)[:200]})") from None
    if isinstance(payload, dict):
        payload = {name: value for name, value in payload.items() if value is not None}
    return parse_body(model, payload)


def worded(kind: Any, message: str) -> Any:
    """`kind` refused with `message` alone (not one error per alternative of a union)."""

    class _Message:
        @staticmethod
        def __get_pydantic_core_schema__(source, handler):
            return core_schema.custom_error_schema(handler(source), custom_error_type="worded",
                                                   custom_error_message=message)

    return Annotated[kind, _Message]


class Matching:
    """Annotates a string that must match `pattern` (its length bounds checked first): refused with `message`."""

    def __init__(self, pattern: str, message: str):
        self.pattern, self.message = pattern, message

    def __get_pydantic_core_schema__(self, source, handler):
        check = core_schema.str_schema(pattern=self.pattern)
        return core_schema.chain_schema([handler(source), core_schema.custom_error_schema(
            check, custom_error_type="worded", custom_error_message=self.message)])

    def __get_pydantic_json_schema__(self, schema, handler):
        return {**handler(schema), "pattern": self.pattern}


class _OpenAPI(GenerateJsonSchema):
    """JSON Schema as OpenAPI 3.0 states it and BentoML keeps it: an optional field is left out rather than null,
    alternatives are `oneOf` (BentoML keeps only the first of an `anyOf`), no titles."""

    def nullable_schema(self, schema):
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema):
        generated = super().default_schema(schema)
        if generated.get("default", 0) is None:
            del generated["default"]
        return generated

    def union_schema(self, schema):
        generated = super().union_schema(schema)
        if "anyOf" in generated:
            generated["oneOf"] = generated.pop("anyOf")
        return generated

    def field_title_should_be_set(self, schema) -> bool:
        return False


def openapi_schema(model: type[BaseModel]) -> dict:
    """The model's JSON schema, self-contained (no `$ref`), as the service's OpenAPI document shows it."""
    schema = model.model_json_schema(schema_generator=_OpenAPI)
    defs = schema.pop("$defs", {})

    def inline(node):
        if isinstance(node, dict):
            if "$ref" in node:
                node = {**defs[node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
            return {key: inline(value) for key, value in node.items() if key != "title"}
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    return {**inline(schema), "title": schema.get("title", model.__name__)}
