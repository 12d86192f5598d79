"""The job-card gateway: one answer per job from the other services, part by part (`jobaware.card`), and the board.

It holds no model: it asks every capability whose registration declares a card part over HTTP (JOBAWARE_<KEY>_URL;
a capability without one is not deployed, never asked), checks that each answer is the deployment's own service's
(`jobaware.identity`, with JOBAWARE_SERVICE_TOKEN_FILE) and says which part is missing when one is down, instead of
failing. With JOBAWARE_CARD_BOARD_STORE (the site's job store), `GET /board` is the board (`jobaware.board`): the
queue with each job's card, verdicts against outcomes, live accuracy, a user's own jobs; without it, no page.
"""

from __future__ import annotations

import anyio
from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import SettingsConfigDict

from jobaware import card, config
from jobaware.board import Asked, Board
from jobaware.bodies import Limits
from jobaware.errors import InputError
from jobaware.serving import observe
from jobaware.serving.base import Route, error_body, service


class CardLimits(Limits):
    """What the gateway accepts (JOBAWARE_CARD_MAX_SCRIPT_CHARS, JOBAWARE_CARD_MAX_NEIGHBOURS,
    JOBAWARE_CARD_MAX_QUEUE: squeue records; the body limit, 16 MiB by default, may bind first), and the job store
    its board reads (JOBAWARE_CARD_BOARD_STORE; none: no board)."""

    model_config = SettingsConfigDict(env_prefix="JOBAWARE_CARD_")
    max_script_chars: int = Field(1 << 20, ge=1)
    max_neighbours: int = Field(100, ge=0)
    max_queue: int = Field(10_000, ge=0)
    board_store: str = ""


LIMITS = CardLimits.load()


class Neighbour(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int | str = Field(description="another job's id")
    class_: str = Field(alias="class", max_length=20, description="its binding class (cpu, mem, network, io)")


class CardRequest(BaseModel):
    """One job: its record as squeue --json or the canonical table gives it, its batch script, and optionally the
    pool jobid of its I/O codings, the classes of the jobs it may share a node with and the queue around it."""

    model_config = ConfigDict(extra="forbid")
    job_id: int = Field(ge=0, le=2**53, description="the job's id")
    job: dict = Field(description="the job's record (squeue --json or canonical), as /predict of failure takes it")
    script: str | None = Field(None, max_length=LIMITS.max_script_chars, description="the batch script")
    similarity_jobid: int | None = Field(None, ge=0, le=2**53, description="the job's id in the similarity pool")
    neighbours: list[Neighbour] = Field(default_factory=list, max_length=LIMITS.max_neighbours)
    queue: list[dict] = Field(default_factory=list, max_length=LIMITS.max_queue,
                              description="the pending and running jobs around it, as squeue --json records")


def job_card(body: CardRequest, services: card.Services, limits: CardLimits) -> dict:
    """The job card; a part whose service is down says so (`status`, `reason`)."""
    answer = card.make_card(body.model_dump(by_alias=True), services)
    card.audit(answer, config.audit_dir() / "card.jsonl")
    observe.card_parts(answer)
    return answer


PAGE_HEADERS = [(b"content-type", b"text/html; charset=utf-8"), (b"x-content-type-options", b"nosniff"),
                # no script runs on the board, whatever a job record holds: it has none, and may load nothing
                (b"content-security-policy", b"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                                             b"form-action 'self'; frame-ancestors 'none'")]


class BoardPage:
    """ASGI middleware of the gateway: `GET /board` is the board (made in a worker thread, two at once); 404 in the
    one error shape when no store is given, 400 for a bad parameter."""

    def __init__(self, app, store: str):
        self.app = app
        self.board = Board(store) if store else None
        self.limiter = anyio.CapacityLimiter(2)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] != "/board" or scope["method"] not in ("GET", "HEAD"):
            return await self.app(scope, receive, send)
        if self.board is None:
            return await self._send(send, 404, error_body("no board here: the gateway was given no job store "
                                                          "(JOBAWARE_CARD_BOARD_STORE)"), b"application/json")
        try:
            asked = Asked.parse(scope.get("query_string") or b"")
        except InputError as exc:
            return await self._send(send, 400, error_body(str(exc)), b"application/json")
        page = await anyio.to_thread.run_sync(self.board.render, asked, limiter=self.limiter)
        await self._send(send, 200, page.encode(), None, head=scope["method"] == "HEAD")

    @staticmethod
    async def _send(send, status: int, body: bytes, media_type: bytes | None, head: bool = False) -> None:
        headers = PAGE_HEADERS if media_type is None else [(b"content-type", media_type)]
        await send({"type": "http.response.start", "status": status,
                    "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": b"" if head else body})


CardService = service("card", "Every registered card part in one answer: failure risk, binding resource, similar "
                      "past jobs, ...", LIMITS, Route("/card", CardRequest, job_card),
                      threads=16, resources=lambda: card.Services(card.service_urls()))  # threads: cards wait on HTTP
CardService.add_asgi_middleware(BoardPage, store=LIMITS.board_store)
