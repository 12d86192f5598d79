"""What every jobaware service shares: following `models:/jobaware-<key>@champion`, readiness, request-size
limits (413), input errors as 400 naming the field, 503 while no champion exists.

The champion is followed by a background thread, never on the request path: a slow or locked registry
stalls no request and no probe; `/readyz` answers from what is loaded; a failed refresh is logged once per
outage and the loaded champion keeps serving.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import logging
import os
import threading
import time

from http import HTTPStatus
from typing import Any

from bentoml.exceptions import BentoMLException, InvalidArgument, ServiceUnavailable
from pydantic import BaseModel, ConfigDict, create_model

from jobaware import tracking
from jobaware.bodies import openapi_schema
from jobaware.errors import InputError, JobawareError, TooLargeError
from jobaware.model import Bundle

logger = logging.getLogger("jobaware.serving")
RELOAD_SECONDS = float(os.environ.get("JOBAWARE_RELOAD_SECONDS", "5"))
MAX_BODY_BYTES = int(os.environ.get("JOBAWARE_MAX_BODY_BYTES", str(16 << 20)))
MAX_ERROR_CHARS = 500


class ChampionFollower:
    """Holds the champion bundle of `jobaware-<key>` and its version; a daemon thread keeps it current."""

    def __init__(self, key: str, reload_seconds: float = RELOAD_SECONDS):
        self.key = key
        self.reload_seconds = reload_seconds
        self._current: tuple[Bundle, str] | None = None
        self.profiles: dict[str, dict | None] = {}  # what each loaded version was trained on (jobaware.fit)
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
            if version is not None and (self._current is None or version != self._current[1]):
                bundle, version = tracking.load_bundle(self.key, version)
                self.profiles[version] = tracking.training_profile(self.key, version)
                bundle.warm()  # state built once per model, before the first request and before /readyz
                self._current = (bundle, version)
                _settle()
                logger.warning("serving jobaware-%s version %s", self.key, version)
            if self._failing:
                logger.warning("the registry answers again for jobaware-%s", self.key)
            self._failing = False
        except Exception as exc:  # noqa: BLE001 - a registry hiccup must not take the service down
            if not self._failing:
                serving = self._current[1] if self._current else "none"
                logger.error("could not refresh the champion of jobaware-%s (serving version %s): %s",
                             self.key, serving, str(exc)[:300])
            self._failing = True

    @property
    def ready(self) -> bool:
        return self._current is not None

    def get(self) -> tuple[Bundle, str]:
        """The loaded (bundle, version); 503 while there is none."""
        current = self._current
        if current is None:
            raise ServiceUnavailable(f"no champion model of jobaware-{self.key} yet; "
                                     f"run `jobaware pipeline run {self.key}`")
        return current


def _settle() -> None:
    """After a model is loaded: collect once, then leave the loaded objects out of the garbage collector's later
    passes (a full pass over a loaded model's millions of objects stalls the requests of that moment for up to
    a tenth of a second). Objects frozen for an earlier model are unfrozen first, so they can go."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def short(message: str) -> str:
    return message if len(message) <= MAX_ERROR_CHARS else message[: MAX_ERROR_CHARS - 3] + "..."


@contextlib.contextmanager
def answering():
    """Input errors become a 400 with a short message that names the field; input over a limit a 413."""
    try:
        yield
    except TooLargeError as exc:
        raise PayloadTooLarge(short(str(exc))) from None
    except (InputError, JobawareError) as exc:
        raise InvalidArgument(short(str(exc))) from None


class PayloadTooLarge(BentoMLException):
    error_code = HTTPStatus.REQUEST_ENTITY_TOO_LARGE


def payload(**fields) -> dict:
    """The request body as the slice's parser expects it: the fields that were given."""
    return {name: value for name, value in fields.items() if value is not None}


def request_body(name: str, model: type[BaseModel] | dict) -> type[BaseModel]:
    """The input model of an endpoint whose body the slice checks itself: the fields pass as they came (pydantic
    checks no value), any other field is refused naming it, and the OpenAPI document shows the slice's `model`
    (or a JSON schema), its exact description of a valid body."""
    schema = model if isinstance(model, dict) else openapi_schema(model)

    def describe(generated: dict) -> None:
        generated.clear()
        generated.update(copy.deepcopy(schema))

    return create_model(name, __config__=ConfigDict(extra="forbid", json_schema_extra=describe),
                        **{field: (Any, None) for field in schema["properties"]})


class BodyLimit:
    """ASGI middleware: a request body over `max_bytes` is answered 413 before the service reads it."""

    def __init__(self, app, max_bytes: int = MAX_BODY_BYTES):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            return await self._too_large(send)
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                return await self._too_large(send)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    async def _too_large(self, send):
        text = json.dumps({"error": f"request body too large: the limit is {self.max_bytes:,} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(text)).encode())]})
        await send({"type": "http.response.body", "body": text})


class ExplainUnavailable:
    """ASGI middleware: BentoML hides the message of every 5xx; a request answered 503 (no champion yet) gets
    the reason instead, so a caller knows to run the pipeline rather than to retry forever."""

    def __init__(self, app, model: str):
        self.app = app
        self.text = json.dumps({"error": f"no champion model of {model} yet; run `jobaware pipeline run "
                                         f"{model.removeprefix('jobaware-')}`"}).encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        replacing = False

        async def explain(message):
            nonlocal replacing
            if message["type"] == "http.response.start" and message["status"] == 503:
                replacing = True
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-length"]
                return await send({**message, "headers": [*headers, (b"content-length", str(len(self.text)).encode())]})
            if replacing and message["type"] == "http.response.body":
                if message.get("more_body"):
                    return None
                return await send({"type": "http.response.body", "body": self.text})
            return await send(message)

        return await self.app(scope, receive, explain)


MAX_ERROR_BYTES = 2_000


def shortened(body: bytes, limit: int = MAX_ERROR_BYTES) -> bytes:
    """An error body cut to `limit` bytes: a list of problems (or BentoML's `detail` list) keeps its first three
    and the count of the rest."""
    try:
        data = json.loads(body)
    except ValueError:
        data = body.decode("utf-8", "replace")
    if isinstance(data, list) and len(data) > 3:
        data = {"errors": data[:3], "more_errors": len(data) - 3}
    elif isinstance(data, dict) and isinstance(data.get("detail"), list) and len(data["detail"]) > 3:  # BentoML's
        data = {**data, "detail": data["detail"][:3], "more_errors": len(data["detail"]) - 3}
    text = json.dumps(data, default=str)
    if len(text) > limit:
        text = json.dumps({"error": f"{text[: limit - 100]}... ({len(text):,} characters in all)"})
    return text.encode()


class ShortErrors:
    """ASGI middleware: an error answer never grows with the request (BentoML lists every invalid item of a
    list); a 4xx body over MAX_ERROR_BYTES is cut to its first problems and their count."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        held: dict = {}
        chunks: list[bytes] = []

        async def cut(message):
            if message["type"] == "http.response.start" and 400 <= message["status"] < 500:
                held["start"] = message
                return None
            if "start" not in held:
                return await send(message)
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return None
            body = b"".join(chunks)
            if len(body) > MAX_ERROR_BYTES:
                body = shortened(body)
            start = held["start"]
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            return await send({"type": "http.response.body", "body": body})

        return await self.app(scope, receive, cut)


def harden(service) -> None:
    """Apply the shared limits and error answers to a `@bentoml.service` class."""
    service.add_asgi_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    service.add_asgi_middleware(ShortErrors)
    service.add_asgi_middleware(ExplainUnavailable, model=service.name)
