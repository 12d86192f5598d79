"""BentoML service for `similarity`: which past jobs had I/O behaviour like this one?"""

from __future__ import annotations

import bentoml

from jobaware.fit import answer_flags
from jobaware.similarity.service import JobBody, SimilarBody, job_request, similar_request
from serving.base import ChampionFollower, answering, harden, payload, request_body

SimilarRequest = request_body("SimilarRequest", SimilarBody)
JobRequest = request_body("JobRequest", JobBody)


@bentoml.service(name="jobaware-similarity", traffic={"timeout": 120})
class SimilarityService:
    """Rank every job of the indexed pool by I/O similarity to a reference job."""

    def __init__(self) -> None:
        self.champion = ChampionFollower("similarity")

    def __is_ready__(self) -> bool:
        return self.champion.ready

    @bentoml.api(route="/similar", input_spec=SimilarRequest)
    def similar(self, **body) -> dict:
        """The pool's jobs ranked by similarity to a pool job or an inline reference, with the histogram."""
        bundle, version = self.champion.get()
        with answering():
            answer = similar_request(bundle, payload(**body))
        return {**answer, "model_version": version, "fit": answer_flags(self.champion.profiles.get(version), version)}

    @bentoml.api(route="/job", input_spec=JobRequest)
    def job(self, jobid=None) -> dict:
        """A pool job's codings and metadata."""
        bundle, version = self.champion.get()
        with answering():
            return {**job_request(bundle, payload(jobid=jobid)), "model_version": version}


harden(SimilarityService)
