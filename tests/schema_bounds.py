"""Every bound a request body's JSON schema states, as cases for a test: whole bodies with one value at a bound
(the schema and the slice's parser should both accept them) and just past it (both should refuse, the parser
naming the field).

`bound_cases(schema, body)` walks the fields present in `body` (a valid body) that the schema describes and, for each, yields its JSON path,
the bodies at its bounds and the bodies past them: minimum/maximum, minLength/maxLength, minItems/maxItems and
enum, for every alternative of a `oneOf` (or `anyOf`). A string with a `pattern` is tried only where `units` gives a piece
that keeps matching it when repeated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

# what Schemathesis judges bodies by; OpenAPI 3.0's schema objects are JSON Schema draft 4 (with extensions)
from jsonschema_rs import Draft4Validator

from jobaware.errors import InputError


def _leaf(kind: dict, units: dict[str, str]) -> tuple[list, list]:
    """(values at the bounds, values past them) of one alternative of a field."""
    if kind.get("enum"):
        return list(kind["enum"]), ["no-such-value"]
    if kind.get("type") in ("integer", "number"):
        return [kind["minimum"], kind["maximum"]], [kind["minimum"] - 1, kind["maximum"] + 1]
    if kind.get("type") == "string":
        unit = units.get(kind["pattern"]) if "pattern" in kind else "x"
        if unit is None:
            return [], []
        low, high = kind.get("minLength", 0), kind.get("maxLength")
        edges = [unit * -(-low // len(unit))] + ([unit * (high // len(unit))] if high is not None else [])
        beyond = ([unit * (low // len(unit) - 1)] if low else []) + ([unit * (high // len(unit) + 1)] if high else [])
        return edges, beyond
    if kind.get("type") == "array" and "minimum" in kind["items"]:
        item = kind["items"]
        low, high = max(kind.get("minItems", 0), 1), kind["maxItems"]
        edges = [[item["minimum"]] * low, [item["maximum"]] * high]
        beyond = [[item["minimum"] - 1], [item["maximum"] + 1], [item["minimum"]] * (high + 1)]
        return edges, beyond + ([[item["minimum"]] * (low - 1)] if kind.get("minItems") else [])
    return [], []


def bound_cases(schema: dict, body, units: dict[str, str] | None = None, path: str = "",
                rebuild: Callable = lambda value: value) -> Iterator[tuple[str, list, list]]:
    units = units or {}
    if isinstance(body, dict) and "properties" in schema:
        for key, value in body.items():
            if key not in schema["properties"]:  # a field the schema leaves open (additionalProperties)
                continue
            yield from bound_cases(schema["properties"][key], value, units, f"{path}.{key}" if path else key,
                                   lambda v, key=key: rebuild({**body, key: v}))
        return
    if isinstance(body, list) and schema.get("type") == "array" and "properties" in schema["items"]:
        edges = [body[:1] * schema["minItems"], body[:1] * schema["maxItems"]]
        beyond = [body[:1] * (schema["minItems"] - 1), body[:1] * (schema["maxItems"] + 1)]
        yield path, [rebuild(e) for e in edges], [rebuild(b) for b in beyond]
        yield from bound_cases(schema["items"], body[0], units, f"{path}[0]", lambda v: rebuild([v, *body[1:]]))
        return
    for kind in schema.get("oneOf") or schema.get("anyOf") or [schema]:
        edges, beyond = _leaf(kind, units)
        if edges or beyond:
            yield path, [rebuild(e) for e in edges], [rebuild(b) for b in beyond]


def check_bounds(schema: dict, bodies: list, parse: Callable, units: dict[str, str] | None = None,
                 semantic: tuple[str, ...] = ()) -> int:
    """For every bound of every field of `bodies`: at the bound the schema and `parse` accept (fields in
    `semantic` hold values the schema cannot describe in full, e.g. a job the pool must know: there `parse` may
    refuse, with an InputError); past it both refuse, `parse` with an InputError naming the field. Returns the cases run."""
    validator = Draft4Validator(schema)
    cases = 0
    for body in bodies:
        assert validator.is_valid(body), f"the base body is not valid: {str(next(validator.iter_errors(body)))[:200]}"
        for path, edges, beyond in bound_cases(schema, body, units):
            for edge in edges:
                assert validator.is_valid(edge), f"{path}: the schema refuses its own bound"
                try:
                    parse(edge)
                except InputError:
                    if path not in semantic:
                        raise
                cases += 1
            for past in beyond:
                assert not validator.is_valid(past), f"{path}: the schema accepts a value past its bound"
                try:
                    parse(past)
                except InputError as error:
                    assert re.match(rf"(body\.)?{re.escape(path)}(?!\w)", str(error)), f"{path}: {error}"
                else:
                    raise AssertionError(f"{path}: the parser accepts a value past the schema's bound")
                cases += 1
    return cases
