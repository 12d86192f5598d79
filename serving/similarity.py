"""BentoML service for `similarity`: which past jobs had I/O behaviour like this one?"""

from __future__ import annotations

from typing import Any

import bentoml
from pydantic import Field

from jobaware.similarity.service import job_request, similar_request
from serving.base import ChampionFollower, answering, harden, payload


@bentoml.service(name="jobaware-similarity", traffic={"timeout": 120})
class SimilarityService:
    """Rank every job of the indexed pool by I/O similarity to a reference job."""

    def __init__(self) -> None:
        self.champion = ChampionFollower("similarity")

    def __is_ready__(self) -> bool:
        return self.champion.ready

    @bentoml.api(route="/similar")
    def similar(
        self,
        jobid: Any = Field(None, description="a job of the pool as the reference"),
        coding: Any = Field(None, description="or an inline binary coding, e.g. '0:256:272:0'"),
        levels: Any = Field(None, description="or inline per-metric levels (9 lists of 0..16)"),
        values: Any = Field(None, description="or inline per-node values (for KS)"),
        algorithm: Any = Field(None, description="b-all, b-aggz, q-lev, q-native, q-phases or ks"),
        top_k: Any = Field(None, description="how many ranked jobs to return"),
        consensus: Any = Field(None, description="several algorithms whose ranks are combined"),
    ) -> dict:
        bundle, version = self.champion.get()
        with answering():
            answer = similar_request(bundle, payload(jobid=jobid, coding=coding, levels=levels, values=values,
                                                     algorithm=algorithm, top_k=top_k, consensus=consensus))
        return {**answer, "model_version": version}

    @bentoml.api(route="/job")
    def job(self, jobid: Any = Field(None, description="a job of the pool")) -> dict:
        bundle, version = self.champion.get()
        with answering():
            return {**job_request(bundle, jobid), "model_version": version}


harden(SimilarityService)
