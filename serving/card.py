"""The job-card gateway: one answer per job from the other services, part by part (`jobaware.card`).

It holds no model: it calls `failure`, `resource` and `similarity` over HTTP (JOBAWARE_<KEY>_URL, else the ports
`jobaware demo` gives them) and says which part is missing when one is down, instead of failing.
"""

from __future__ import annotations

import bentoml
from pydantic import BaseModel, ConfigDict, Field

from jobaware import capabilities, card, config
from serving.base import harden

MAX_SCRIPT_CHARS = 1 << 20
MAX_NEIGHBOURS = 100


class Neighbour(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int | str = Field(description="another job's id")
    class_: str = Field(alias="class", max_length=20, description="its binding class (cpu, mem, network, io)")


class CardRequest(BaseModel):
    """One job: its record as squeue --json or the canonical table gives it, its batch script, and optionally the
    pool jobid of its I/O codings and the classes of the jobs it may share a node with."""

    model_config = ConfigDict(extra="forbid")
    job_id: int = Field(ge=0, le=2**53, description="the job's id")
    job: dict = Field(description="the job's record (squeue --json or canonical), as /predict of failure takes it")
    script: str | None = Field(None, max_length=MAX_SCRIPT_CHARS, description="the batch script")
    similarity_jobid: int | None = Field(None, ge=0, le=2**53, description="the job's id in the similarity pool")
    neighbours: list[Neighbour] = Field(default_factory=list, max_length=MAX_NEIGHBOURS)


@bentoml.service(name="jobaware-card", traffic={"timeout": 60})
class CardService:
    """Failure risk, binding resource with a pairing hint, and similar past jobs, in one answer."""

    def __init__(self) -> None:
        keys = capabilities.keys()
        self.urls = {key: config.service_url(key, keys) for key in card.PARTS}

    @bentoml.api(route="/card", input_spec=CardRequest)
    def card(self, **body) -> dict:
        """The job card; a part whose service is down says so (`status`, `reason`)."""
        request = CardRequest.model_validate(body)
        neighbours = [{"id": n.id, "class": n.class_} for n in request.neighbours]
        answer = card.make_card(request.job_id, request.job, request.script, self.urls,
                                similarity_jobid=request.similarity_jobid, neighbours=neighbours)
        card.audit({"action": "card", "job_id": request.job_id, "short": answer["short"],
                    "missing": answer["missing"], "versions": card.versions(answer)},
                   config.audit_dir() / "card.jsonl")
        return answer


harden(CardService)
