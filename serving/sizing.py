"""BentoML service for `sizing`: what time limit and memory should this job ask for?"""

from __future__ import annotations

import bentoml

from jobaware.sizing.service import SizeBody, size_request
from serving.base import ChampionFollower, answering, harden, payload, request_body

SizeRequest = request_body("SizeRequest", SizeBody)


@bentoml.service(name="jobaware-sizing", traffic={"timeout": 60})
class SizingService:
    """Recommend a time limit and memory per processor each job fits within with the stated probability."""

    def __init__(self) -> None:
        self.champion = ChampionFollower("sizing")

    def __is_ready__(self) -> bool:
        return self.champion.ready

    @bentoml.api(route="/size", input_spec=SizeRequest)
    def size(self, **body) -> dict:
        """Per job: the recommended time limit and memory per processor, beside what it asked, and the coverage."""
        bundle, version = self.champion.get()
        with answering():
            return size_request(payload(**body), bundle, version, trained=self.champion.profiles.get(version))


harden(SizingService)
