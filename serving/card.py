"""The job-card gateway: one answer per job from the other services, part by part (`jobaware.card`).

It holds no model: it asks every capability whose registration declares a card part over HTTP (JOBAWARE_<KEY>_URL,
else the ports `jobaware demo` gives them) and says which part is missing when one is down, instead of failing.
"""

from __future__ import annotations

import bentoml
from pydantic import BaseModel, ConfigDict, Field

from jobaware import card, config
from serving.base import harden

MAX_SCRIPT_CHARS = 1 << 20
MAX_NEIGHBOURS = 100
MAX_QUEUE = 10_000  # squeue records; the body limit (16 MiB by default) may bind first


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
    script: str | None = Field(None, max_length=MAX_SCRIPT_CHARS, description="the batch script")
    similarity_jobid: int | None = Field(None, ge=0, le=2**53, description="the job's id in the similarity pool")
    neighbours: list[Neighbour] = Field(default_factory=list, max_length=MAX_NEIGHBOURS)
    queue: list[dict] = Field(default_factory=list, max_length=MAX_QUEUE,
                              description="the pending and running jobs around it, as squeue --json records")


@bentoml.service(name="jobaware-card", traffic={"timeout": 60})
class CardService:
    """Every registered card part in one answer: failure risk, binding resource, similar past jobs, ..."""

    def __init__(self) -> None:
        self.services = card.Services(card.service_urls())

    @bentoml.api(route="/card", input_spec=CardRequest)
    def card(self, **body) -> dict:
        """The job card; a part whose service is down says so (`status`, `reason`)."""
        request = CardRequest.model_validate(body)
        answer = card.make_card(request.model_dump(by_alias=True), self.services)
        card.audit(answer, config.audit_dir() / "card.jsonl")
        return answer


harden(CardService)
