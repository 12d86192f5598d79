"""BentoML service for `resource`: is this job script CPU-, memory-, network- or I/O-bound? Parsed, never run."""

from __future__ import annotations

from typing import Any

import bentoml
from pydantic import Field

from jobaware.resource.service import classify_request, pairing_request
from serving.base import ChampionFollower, answering, harden, payload


@bentoml.service(name="jobaware-resource", traffic={"timeout": 60})
class ResourceService:
    """Classify job scripts from their syntax tree; pair jobs whose bottlenecks differ."""

    def __init__(self) -> None:
        self.champion = ChampionFollower("resource")

    def __is_ready__(self) -> bool:
        return self.champion.ready

    @bentoml.api(route="/classify")
    def classify(
        self,
        scripts: Any = Field(None, description='[{"name": ..., "text": ... | "base64": ...}, ...]'),
        name: Any = Field(None, description="or one script: its name"),
        text: Any = Field(None, description="its text"),
        base64: Any = Field(None, description="or its bytes, base64-encoded"),
        top: Any = Field(None, description="how many deciding features to report per script"),
    ) -> dict:
        bundle, version = self.champion.get()
        with answering():
            return classify_request(payload(scripts=scripts, name=name, text=text, base64=base64, top=top),
                                    bundle, version)

    @bentoml.api(route="/pairing")
    def pairing(
        self,
        jobs: Any = Field(None, description='[{"id": ..., "class": ... | "text": ...}, ...]'),
        threshold: Any = Field(None, description="the least score of a recommended pair"),
    ) -> dict:
        bundle, version = self.champion.get()
        with answering():
            return pairing_request(payload(jobs=jobs, threshold=threshold), bundle, version)


harden(ResourceService)
