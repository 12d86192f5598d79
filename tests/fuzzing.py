"""Generated inputs for the fuzz tests: how many (`JOBAWARE_FUZZ_EXAMPLES`; `make fuzz` raises it), and a
Schemathesis run over a live service's own OpenAPI document that keeps every answer's status, size and time."""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings

MAX_ERROR_BYTES = 5_000   # a 4xx says what was wrong, in a line, whatever came in
MAX_SECONDS = 10.0        # per answer, on this 2-core machine
PROGRESS_EVERY = 5_000    # a long run (`make fuzz`) prints its counts so far this often


def examples(default: int = 30) -> int:
    return int(os.environ.get("JOBAWARE_FUZZ_EXAMPLES", default))


def fuzz_settings(n: int):
    return settings(max_examples=n, deadline=None, database=None, derandomize=True, print_blob=False,
                    suppress_health_check=list(HealthCheck))


@dataclass
class FuzzReport:
    name: str = ""
    calls: int = 0
    statuses: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    slowest: float = 0.0
    valid: Counter = field(default_factory=Counter)  # the statuses of bodies generated as valid by the schema
    refused_valid: Counter = field(default_factory=Counter)  # why such bodies were refused (4xx), in short
    started: float = field(default_factory=time.monotonic)

    def record(self, response, seconds: float, what: str, valid: bool = False) -> None:
        """Count one answer; note it as a failure when it is a 5xx, a long 4xx or a slow one."""
        self.calls += 1
        self.statuses[response.status_code] += 1
        if valid:
            self.valid[response.status_code] += 1
            if 400 <= response.status_code < 500:
                self.refused_valid[_reason(response)] += 1
        self.slowest = max(self.slowest, seconds)
        problem = None
        if response.status_code >= 500:
            problem = f"{response.status_code} {response.text[:200]}"
        elif response.status_code >= 400 and len(response.content) > MAX_ERROR_BYTES:
            problem = f"a {len(response.content):,}-byte {response.status_code}"
        elif seconds > MAX_SECONDS:
            problem = f"answered after {seconds:.1f} s"
        if problem and len(self.failures) < 20:
            self.failures.append(f"{what}: {problem}")
        if self.calls % PROGRESS_EVERY == 0:
            print(f"  so far, {time.monotonic() - self.started:,.0f} s: {self.line()}", flush=True)

    def line(self) -> str:
        codes = ", ".join(f"{code}: {count}" for code, count in sorted(self.statuses.items()))
        valid = f"; valid by the schema: {self.answered_valid():.0%} of {sum(self.valid.values())} answered 2xx" if self.valid else ""
        if self.refused_valid:
            valid += " (refused: " + "; ".join(f"{n} x {why}" for why, n in self.refused_valid.most_common(3)) + ")"
        return f"{self.name}: {self.calls} generated requests ({codes}){valid}; slowest {self.slowest:.2f} s; {len(self.failures)} failed"

    def answered_valid(self) -> float:
        """The share of bodies valid by the schema that were answered 2xx."""
        return sum(n for code, n in self.valid.items() if 200 <= code < 300) / max(sum(self.valid.values()), 1)


def _reason(response) -> str:
    """The start of a 4xx's message, numbers and quoted values blanked: what kind of refusal it was."""
    import re

    try:
        body = response.json()
    except ValueError:
        body = response.text
    body = body[0] if isinstance(body, list) and body else body  # BentoML answers a 400 as a list of one error
    message = str(body.get("error", body)) if isinstance(body, dict) else str(body)
    return re.sub(r"'[^']*'|\d+", "#", message)[:70]


def body_validator(document: dict, path: str):
    """A validator of the JSON request body of `POST path`, as the service's OpenAPI document describes it."""
    return _validator(document, document["paths"][path]["post"]["requestBody"])


def answer_validator(document: dict, path: str):
    """A validator of the JSON 200 answer of `POST path`, as the service's OpenAPI document describes it."""
    return _validator(document, document["paths"][path]["post"]["responses"]["200"])


def _validator(document: dict, part: dict):
    from jsonschema_rs import Draft4Validator

    schema = part["content"]["application/json"]["schema"]
    return Draft4Validator({**schema, "components": document.get("components", {})})  # its $refs resolve


def fuzz_service(name: str, url: str, n: int) -> FuzzReport:
    """Every POST operation of the service, with valid and invalid generated bodies (n of each): no 5xx, error
    bodies under MAX_ERROR_BYTES, every answer within MAX_SECONDS. A body counts as valid when it is valid by the
    document (Schemathesis' positive mode does not always keep to an `allOf` of `anyOf`s)."""
    import httpx
    import requests
    import schemathesis
    from schemathesis import GenerationMode

    document = httpx.get(f"{url}/docs.json", timeout=30).json()
    schema = schemathesis.openapi.from_dict(document)
    report, session = FuzzReport(f"{name} (OpenAPI)"), requests.Session()  # one session: connections kept
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.method.upper() != "POST":
            continue
        validator = body_validator(document, operation.path)
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @fuzz_settings(n)
            @given(case=operation.as_strategy(generation_mode=mode))
            def call(case):
                started = time.monotonic()
                response = case.call(base_url=url, session=session, timeout=60)
                report.record(response, time.monotonic() - started,
                              f"{operation.method} {operation.path} {mode.value} (body {str(case.body)[:200]})",
                              valid=isinstance(case.body, dict) and validator.is_valid(case.body))

            call()
    session.close()
    return report


EXTREME_VALUES = [10**30, -1, -(2**63), 2**64, 1e308, float("nan"), float("inf"), 0.5, "", "x" * 20_000, None, [],
                  {}, True, "NaN", "1e400", "\x00", "\udcff".encode("utf-8", "surrogatepass").decode("latin-1"),
                  [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]


def _paths(value, prefix=()):
    """Every path to a value inside a JSON document."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:5]):
            yield from _paths(item, (*prefix, index))


def _mutated(document, edits):
    import copy

    document = copy.deepcopy(document)
    paths = list(_paths(document))
    for kind, at, extreme in edits:
        path = paths[at % len(paths)]
        if not path:
            continue
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        if kind == "replace":
            parent[last] = copy.deepcopy(extreme)  # never the shared value itself: a later edit would change it
        elif kind == "delete":
            del parent[last]
        elif kind == "repeat" and isinstance(parent, list):
            parent.extend([parent[last]] * 50)
        paths = list(_paths(document))
    return document


def fuzz_example(name: str, url: str, route: str, example, n: int) -> FuzzReport:
    """The capability's own request example with values made extreme, fields dropped and items repeated:
    nothing beyond a 4xx, every error short, every answer within MAX_SECONDS."""
    import json

    import httpx
    from hypothesis import strategies as st

    report = FuzzReport(f"{name} (example mutated)")
    edit = st.tuples(st.sampled_from(["replace", "replace", "delete", "repeat"]), st.integers(0, 10**6),
                     st.sampled_from(EXTREME_VALUES))

    with httpx.Client(base_url=url, timeout=60) as client:  # one client: a new one per request costs 40 ms of TLS set-up

        @fuzz_settings(n)
        @given(edits=st.lists(edit, min_size=1, max_size=3))
        def call(edits):
            body = json.dumps(_mutated(example, edits))  # NaN and Infinity go out as the tokens a careless client sends
            started = time.monotonic()
            response = client.post(route, content=body.encode(), headers={"content-type": "application/json"})
            report.record(response, time.monotonic() - started, f"POST {route} (body {body[:300]})")

        call()
    return report
