"""What every jobaware service shares, so that `serving/<key>.py` is a route table: `service(...)` builds the BentoML
service of a capability from its routes (a path, the slice's pydantic body, the slice's function that returns the
whole answer) and its limits.

Every service: follows `models:/jobaware-<key>@champion` from a background thread (never on the request path: a slow
or locked registry stalls no request and no probe; `/readyz` answers from what is loaded; a failed refresh is logged
once per outage and the loaded champion keeps serving); reads each body once, as the route's body model; answers
every error in one shape, `{"error": "<one line>", "field": "<JSON path>" | null}`, never echoing the body: 400 for
bad input, 413 over a limit, 415 for a body that is not JSON, 503 with the reason while no champion exists; serves
its OpenAPI document at `/docs.json` and a page that shows it at `/docs` (and `/`), loading nothing from elsewhere;
proves on every answer that it is the deployment's own service (`jobaware.identity`, with the site's token); cuts
off a client that sends its request slowly and caps the connections open at once (`jobaware.serving.connections`).
"""

from __future__ import annotations

import copy
import gc
import inspect
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import anyio
import bentoml
import pydantic_core
from pydantic import BaseModel, Field
from pydantic_settings import SettingsConfigDict
from starlette.responses import Response

from jobaware import config, identity, tracking
from jobaware.bodies import Limits, openapi_schema, read_json
from jobaware.errors import InputError, JobawareError, TooLargeError
from jobaware.model import Served
from jobaware.serving import connections, observe

logger = logging.getLogger("jobaware.serving")
MAX_ERROR_CHARS = 500


class ServingLimits(Limits):
    """What every service shares: JOBAWARE_MAX_BODY_BYTES (a larger body is answered 413 before it is read whole),
    JOBAWARE_RELOAD_SECONDS (how often the registry is asked for a new champion), and per connection
    (`jobaware.serving.connections`): JOBAWARE_HEADER_TIMEOUT_S (a request's headers are due within it), JOBAWARE_BODY_TIMEOUT_S
    (then its body within this more), JOBAWARE_MAX_CONNECTIONS (open at once, per server process; keep the process's
    file descriptor limit, systemd's LimitNOFILE, well above it)."""

    model_config = SettingsConfigDict(env_prefix="JOBAWARE_")
    max_body_bytes: int = Field(16 << 20, ge=1024)
    reload_seconds: float = Field(5.0, gt=0)
    header_timeout_s: float = Field(5.0, gt=0, le=300)
    body_timeout_s: float = Field(5.0, gt=0, le=3600)
    max_connections: int = Field(1024, ge=1, le=1_000_000)


SERVING = ServingLimits.load()
MAX_BODY_BYTES = SERVING.max_body_bytes


class NoChampion(JobawareError):
    """No champion model is loaded yet (the service answers 503 with this reason)."""


class ChampionFollower:
    """Holds the champion bundle of `jobaware-<key>` and its version; a daemon thread keeps it current."""

    def __init__(self, key: str, reload_seconds: float = SERVING.reload_seconds):
        self.key = key
        self.reload_seconds = reload_seconds
        self._current: Served | None = None
        self._failing = False
        self._thread = threading.Thread(target=self._follow, name=f"champion-{key}", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        while True:
            self.refresh()
            time.sleep(self.reload_seconds)

    def refresh(self) -> None:
        """Load the champion if it moved. Errors are logged once per outage; what is loaded stays."""
        try:
            version = tracking.champion_version(self.key)
            if version is not None and (self._current is None or version != self._current.version):
                bundle, version = tracking.load_bundle(self.key, version)
                profile = tracking.training_profile(self.key, version)  # what it was trained on (jobaware.fit)
                bundle.warm()  # state built once per model, before the first request and before /readyz
                before = self._current.version if self._current else None
                self._current = Served(bundle, version, profile)
                _settle()
                logger.warning("serving jobaware-%s version %s", self.key, version)
                observe.served(self.key, version, before, self._facts(version))
            if self._failing:
                logger.warning("the registry answers again for jobaware-%s", self.key)
            self._failing = False
        except Exception as exc:  # noqa: BLE001 - a registry hiccup must not take the service down
            if not self._failing:
                serving = self._current.version if self._current else "none"
                logger.error("could not refresh the champion of jobaware-%s (serving version %s): %s",
                             self.key, serving, str(exc)[:300])
            self._failing = True
        observe.registry_failing(self.key, self._failing)

    def _facts(self, version: str) -> dict | None:
        """When `version` was registered and its evaluation (`tracking.version_facts`); None when unreadable."""
        try:
            return tracking.version_facts(self.key, version)
        except Exception as exc:  # noqa: BLE001 - the model serves without them; its series say less
            logger.error("could not read when jobaware-%s version %s was registered: %s", self.key, version,
                         str(exc)[:300])
            return None

    @property
    def ready(self) -> bool:
        return self._current is not None

    def get(self) -> Served:
        """The loaded model; NoChampion while there is none."""
        current = self._current
        if current is None:
            raise NoChampion(no_champion(self.key))
        return current


def no_champion(key: str) -> str:
    return f"no champion model of jobaware-{key} yet; run `jobaware pipeline run {key}`"


def _settle() -> None:
    """After a model is loaded: collect once, then leave the loaded objects out of the garbage collector's later
    passes (a full pass over a loaded model's millions of objects stalls the requests of that moment for up to
    a tenth of a second). Objects frozen for an earlier model are unfrozen first, so they can go."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


# ---------------------------------------------------------------- the one error shape
_FIELD = re.compile(r"^((?:[A-Za-z_][\w-]*|\[\d+\])(?:\.[A-Za-z_][\w-]*|\[\d+\])*): ")


def error_body(message: str) -> bytes:
    """`{"error": message, "field": its JSON path}`: the field is the path a message starts with (jobaware's errors
    are led by it: `jobs[1].nodes_req: ...`), null when the message is about the whole body or names none."""
    message = message if len(message) <= MAX_ERROR_CHARS else message[: MAX_ERROR_CHARS - 3] + "..."
    found = _FIELD.match(message)
    field = found.group(1) if found and found.group(1) != "body" else None
    return json.dumps({"error": message, "field": field}).encode()


def error_response(status: int, message: str) -> Response:
    return Response(error_body(message), status_code=status, media_type="application/json")


# ---------------------------------------------------------------- routes and the service
@dataclass(frozen=True)
class Route:
    """One endpoint: `POST path` takes `body` (the slice's pydantic model: it checks the body once and is what the
    OpenAPI document shows); `answer(body, model, limits)` returns the whole answer as a JSON-ready dict (model is
    the served `jobaware.model.Served`; for a service without a model, what its `resources` built, else None).
    `answer_model` describes a 200 in the document (default: an object). A body of at most `inline_bytes` is read
    and answered on the event loop (where that takes well under a millisecond); every other body in a worker thread,
    so that probes and small requests are not held up behind it."""

    path: str
    body: type[BaseModel]
    answer: Callable[[Any, Served | None, Limits], dict]
    answer_model: type[BaseModel] | None = None
    inline_bytes: int = 0

    @property
    def name(self) -> str:
        return self.path.strip("/").replace("-", "_").replace("/", "_")


class JsonBody(bentoml.IODescriptor):
    """A request body handed to the service as it came (its bytes and content type): the service reads it once, as
    the route's body model. The OpenAPI document shows that model's schema (`document`)."""

    raw: Any = None
    media_type_given: Any = None
    document: ClassVar[dict] = {"type": "object"}

    @classmethod
    async def from_http_request(cls, request, serde) -> JsonBody:
        return cls.model_construct(raw=await request.body(), media_type_given=request.headers.get("content-type"))

    @classmethod
    def model_json_schema(cls, *args, **kwargs) -> dict:
        return copy.deepcopy(cls.document)


def json_body(route: Route) -> type[JsonBody]:
    schema = openapi_schema(route.body)
    return type(schema.get("title", route.body.__name__), (JsonBody,), {"document": schema,
                                                                     "__module__": __name__})


def is_json(media_type: str | None) -> bool:
    """Whether a request's content type says JSON: `application/json` (with parameters, such as a charset) only. A
    body without one is not read as JSON: a browser posts text/plain (or no type) across sites without asking."""
    return (media_type or "").split(";")[0].strip().lower() == "application/json"


class ModelService:
    """What every generated service class shares (`service()` fills in the class variables)."""

    name: ClassVar[str]  # jobaware-<name>
    key: ClassVar[str | None] = None  # the capability whose champion it follows; None: no model
    limits: ClassVar[Limits]
    threads: ClassVar[int] = 1
    resources: ClassVar[Callable[[], Any] | None] = None  # a service without a model: what its routes are given

    def __init__(self) -> None:
        self.champion = ChampionFollower(self.key) if self.key else None
        self.built = self.resources() if self.resources is not None else None
        self.limiter = anyio.CapacityLimiter(self.threads)

    def __is_ready__(self) -> bool:
        return self.champion is None or self.champion.ready

    async def respond(self, route: Route, raw: bytes, media_type: str | None) -> Response:
        """The route's answer as JSON, or the error in the one shape."""
        try:
            model = self.champion.get() if self.champion is not None else self.built
            if not is_json(media_type):
                given = repr(media_type[:100]) if media_type else "no content-type"
                return self.refused(route, 415, "not_json",
                                    f"body: expected JSON (content-type: application/json), got {given}")
            if len(raw or b"") <= route.inline_bytes:
                answer = self.answer(route, raw, model)
            else:
                answer = await anyio.to_thread.run_sync(self.answer, route, raw, model, limiter=self.limiter)
        except NoChampion as exc:
            return self.refused(route, 503, "no_champion", str(exc))
        except TooLargeError as exc:
            return self.refused(route, 413, "too_large", str(exc))
        except (InputError, JobawareError) as exc:
            return self.refused(route, 400, "bad_input", str(exc))
        return Response(answer, media_type="application/json")

    def refused(self, route: Route, status: int, reason: str, message: str) -> Response:
        """The error answer, counted by reason (`jobaware_service_errors_total`)."""
        observe.error(self.name, route.path, reason)
        return error_response(status, message)

    def answer(self, route: Route, raw: bytes, model: Served | None) -> bytes:
        """The body read as the route's model, answered, and encoded here in one piece (BentoML would validate the
        answer against its model again and send it in chunks)."""
        return pydantic_core.to_json(route.answer(read_json(route.body, raw), model, self.limits), inf_nan_mode="null")


def _endpoint(route: Route):
    """The BentoML API method of a route: BentoML hands it the body's bytes and content type (`JsonBody`'s fields)."""

    async def endpoint(self, raw: Any = None, media_type_given: Any = None) -> Response:
        return await self.respond(route, raw, media_type_given)

    endpoint.__name__ = endpoint.__qualname__ = route.name
    endpoint.__doc__ = inspect.cleandoc(route.answer.__doc__ or "")
    return bentoml.api(route=route.path, input_spec=json_body(route), output_spec=route.answer_model or dict)(endpoint)


def service(name: str, question: str, limits: Limits, *routes: Route, key: str | None = None, timeout: int = 60,
            threads: int = 1, resources: Callable[[], Any] | None = None):
    """The BentoML service `jobaware-<name>` answering `routes` under `limits`; with `key`, following that
    capability's champion (503 until there is one). `threads`: bodies answered at once in worker threads. Without
    `key`, `resources` (if given) is called once when the service starts, and its result (the card gateway's HTTP
    clients) is handed to the routes in the model's place."""
    namespace = {"name": f"jobaware-{name}", "key": key, "limits": limits, "threads": threads, "__doc__": question,
                 "__module__": f"serving.{name}",
                 "resources": staticmethod(resources) if resources is not None else None}
    namespace.update({route.name: _endpoint(route) for route in routes})
    cls = type(f"{name.title().replace('-', '')}Service", (ModelService,), namespace)
    built = bentoml.service(name=f"jobaware-{name}", traffic={"timeout": timeout})(cls)
    harden(built)
    connections.install(SERVING.header_timeout_s, SERVING.body_timeout_s, SERVING.max_connections, built.name)
    observe.install()
    return built


# ---------------------------------------------------------------- the middleware every service gets
class BodyLimit:
    """ASGI middleware: a request body over `max_bytes` is answered 413 before the service reads it."""

    def __init__(self, app, max_bytes: int = MAX_BODY_BYTES, service: str = "", routes: frozenset[str] = frozenset()):
        self.app = app
        self.max_bytes = max_bytes
        self.service, self.routes = service, routes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            return await self._too_large(scope, send)
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                return await self._too_large(scope, send)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    async def _too_large(self, scope, send):
        observe.error(self.service, observe.endpoint_label(scope["path"], self.routes), "too_large")
        await _send(send, 413, error_body(f"request body too large: the limit is {self.max_bytes:,} bytes"))


async def _send(send, status: int, body: bytes, media_type: bytes = b"application/json") -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", media_type), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


MAX_HELD_ERROR_BYTES = 1 << 16


def one_shape(body: bytes, status: int, method: str, path: str, unavailable: str) -> bytes:
    """An error answer of BentoML or Starlette (a 404 in text, BentoML's `[{"error": ...}]` or its `detail` list)
    in the one shape; an answer already in it is kept."""
    try:
        data = json.loads(body)
    except ValueError:
        data = body.decode("utf-8", "replace").strip()
    if isinstance(data, dict) and set(data) == {"error", "field"}:
        return body
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = data[0]
    if status == 503:
        return error_body(unavailable)
    if isinstance(data, dict) and isinstance(data.get("detail"), list) and data["detail"]:
        first = data["detail"][0]
        return error_body(f"body: {first.get('msg', 'not valid') if isinstance(first, dict) else first}")
    text = data.get("error") if isinstance(data, dict) else data
    return error_body(f"{str(text or 'error')[:200]}: {method} {path}" if status in (404, 405) else str(text or status))


class OneErrorShape:
    """ASGI middleware: every answer of 400 and above leaves as `{"error": ..., "field": ...}` (the routes answer
    so themselves; BentoML's and Starlette's own answers are rewritten), never longer than MAX_ERROR_CHARS."""

    def __init__(self, app, unavailable: str):
        self.app = app
        self.unavailable = unavailable

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        held: dict = {}
        chunks: list[bytes] = []

        async def shaped(message):
            if message["type"] == "http.response.start" and message["status"] >= 400:
                held["start"] = message
                return None
            if "start" not in held:
                return await send(message)
            if sum(map(len, chunks)) < MAX_HELD_ERROR_BYTES:
                chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return None
            start = held["start"]
            body = one_shape(b"".join(chunks), start["status"], scope["method"], scope["path"], self.unavailable)
            headers = [(k, v) for k, v in start.get("headers", [])
                       if k.lower() not in (b"content-length", b"content-type")]
            await send({**start, "headers": [*headers, (b"content-type", b"application/json"),
                                             (b"content-length", str(len(body)).encode())]})
            return await send({"type": "http.response.body", "body": body})

        return await self.app(scope, receive, shaped)


STATIC = Path(bentoml.__file__).parent / "_internal" / "server" / "static_content"
DOCS_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}: API</title>
<link rel="stylesheet" href="./static_content/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="./static_content/swagger-ui-bundle.js"></script>
<script>
  // this service's own OpenAPI document, drawn by the Swagger UI that BentoML ships; no validator badge (it would
  // send the document to validator.swagger.io) and nothing else loaded from elsewhere
  window.ui = SwaggerUIBundle({{url: "./docs.json", dom_id: "#swagger-ui", validatorUrl: null, deepLinking: true}});
</script>
</body>
</html>
"""


class Docs:
    """ASGI middleware: `GET /docs` (and `/`) is a page that shows the service's OpenAPI document with the Swagger
    UI BentoML ships (under `/static_content/`), replacing BentoML's own index page, which loads a tag manager from
    the internet; `GET /docs.json` is BentoML's document with the service's own description (BentoML's default one
    shows badges from image hosts), built once."""

    def __init__(self, app, served):
        self.app = app
        self.served = served
        self.page = DOCS_PAGE.format(title=served.name).encode()
        self.document: bytes | None = None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            return await self.app(scope, receive, send)
        if scope["path"] in ("/", "/docs"):
            return await _send(send, 200, self.page, b"text/html; charset=utf-8")
        if scope["path"] == "/docs.json":
            if self.document is None:
                document = self.served.openapi_spec.asdict()
                document["info"].update(description=self.served.inner.__doc__ or "", contact={"name": "jobaware"})
                self.document = json.dumps(document, default=str).encode()
            return await _send(send, 200, self.document)
        return await self.app(scope, receive, send)


class Proof:
    """ASGI middleware: with the site's service token, the answer to every request that carries a nonce
    (`jobaware.identity`) carries its proof, errors and probes included; such an answer is held whole to hash it.
    Without a token, or to a request without a nonce, answers go as they are."""

    def __init__(self, app, token: bytes | None):
        self.app = app
        self.token = token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self.token is None:
            return await self.app(scope, receive, send)
        nonce = next((value.decode("latin-1") for name, value in scope.get("headers") or [] if name == NONCE), None)
        if not identity.is_nonce(nonce):
            return await self.app(scope, receive, send)
        held: dict = {}
        chunks: list[bytes] = []

        async def proven(message):
            if message["type"] == "http.response.start":
                held["start"] = message
                return None
            if message["type"] != "http.response.body":
                return await send(message)
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return None
            body = b"".join(chunks)
            start = held["start"]
            sign = (PROOF, identity.proof(self.token, nonce, body).encode())
            await send({**start, "headers": [*start.get("headers", []), sign]})
            return await send({"type": "http.response.body", "body": body})

        return await self.app(scope, receive, proven)


NONCE, PROOF = identity.NONCE.encode(), identity.PROOF.encode()


def harden(built) -> None:
    """The shared middleware of a `@bentoml.service`: the identity proof (outermost, so that it covers every answer
    of the ones below), the body limit, the one error shape, the docs page."""
    built.add_asgi_middleware(Proof, token=config.service_token())
    routes = frozenset(api.route for api in built.apis.values())
    built.add_asgi_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES, service=built.name, routes=routes)
    key = built.inner.key
    built.add_asgi_middleware(OneErrorShape, unavailable=no_champion(key) if key else "not ready")
    built.add_asgi_middleware(Docs, served=built)
