"""The job-card gateway: one answer per job from the other services, part by part (`jobaware.card`).

It holds no model: it asks every capability whose registration declares a card part over HTTP (JOBAWARE_<KEY>_URL;
a capability without one is not deployed, never asked), checks that each answer is the deployment's own service's
(`jobaware.identity`, with JOBAWARE_SERVICE_TOKEN_FILE) and says which part is missing when one is down, instead of
failing.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import SettingsConfigDict

from jobaware import card, config
from jobaware.bodies import Limits
from jobaware.serving import observe
from jobaware.serving.base import Route, service


class CardLimits(Limits):
    """What the gateway accepts (JOBAWARE_CARD_MAX_SCRIPT_CHARS, JOBAWARE_CARD_MAX_NEIGHBOURS,
    JOBAWARE_CARD_MAX_QUEUE: squeue records; the body limit, 16 MiB by default, may bind first)."""

    model_config = SettingsConfigDict(env_prefix="JOBAWARE_CARD_")
    max_script_chars: int = Field(1 << 20, ge=1)
    max_neighbours: int = Field(100, ge=0)
    max_queue: int = Field(10_000, ge=0)


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


CardService = service("card", "Every registered card part in one answer: failure risk, binding resource, similar "
                      "past jobs, ...", LIMITS, Route("/card", CardRequest, job_card),
                      threads=16, resources=lambda: card.Services(card.service_urls()))  # threads: cards wait on HTTP
