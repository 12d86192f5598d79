"""The job-card gateway: one answer per job from the other services, part by part (`jobaware.card`).

It holds no model: it calls `failure`, `resource` and `similarity` over HTTP (JOBAWARE_<KEY>_URL, else the ports
`jobaware demo` gives them) and says which part is missing when one is down, instead of failing.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import SettingsConfigDict

from jobaware import capabilities, card, config
from jobaware.bodies import Limits
from serving.base import Route, service


class CardLimits(Limits):
    """What the gateway accepts (JOBAWARE_CARD_MAX_SCRIPT_CHARS, JOBAWARE_CARD_MAX_NEIGHBOURS)."""

    model_config = SettingsConfigDict(env_prefix="JOBAWARE_CARD_")
    max_script_chars: int = Field(1 << 20, ge=1)
    max_neighbours: int = Field(100, ge=0)


LIMITS = CardLimits.load()


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
    script: str | None = Field(None, max_length=LIMITS.max_script_chars, description="the batch script")
    similarity_jobid: int | None = Field(None, ge=0, le=2**53, description="the job's id in the similarity pool")
    neighbours: list[Neighbour] = Field(default_factory=list, max_length=LIMITS.max_neighbours)


def job_card(body: CardRequest, model: None, limits: CardLimits) -> dict:
    """The job card; a part whose service is down says so (`status`, `reason`)."""
    keys = capabilities.keys()
    urls = {key: config.service_url(key, keys) for key in card.PARTS}
    neighbours = [{"id": n.id, "class": n.class_} for n in body.neighbours]
    answer = card.make_card(body.job_id, body.job, body.script, urls, similarity_jobid=body.similarity_jobid,
                            neighbours=neighbours)
    card.audit({"action": "card", "job_id": body.job_id, "short": answer["short"], "missing": answer["missing"],
                "versions": card.versions(answer)}, config.audit_dir() / "card.jsonl")
    return answer


CardService = service("card", "Failure risk, binding resource with a pairing hint, and similar past jobs, in one "
                      "answer.", LIMITS, Route("/card", CardRequest, job_card))
