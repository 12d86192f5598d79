"""BentoML service for `wait`: when will this job start?"""

from __future__ import annotations

import bentoml

from jobaware.wait.service import WaitBody, wait_request
from serving.base import ChampionFollower, answering, harden, payload, request_body

WaitRequest = request_body("WaitRequest", WaitBody)


@bentoml.service(name="jobaware-wait", traffic={"timeout": 60})
class WaitService:
    """When will a job start? A median, an 80 % range and a 95 % bound, from the queue as it stands."""

    def __init__(self) -> None:
        self.champion = ChampionFollower("wait")

    def __is_ready__(self) -> bool:
        return self.champion.ready

    @bentoml.api(route="/wait", input_spec=WaitRequest)
    def wait(self, **body) -> dict:
        """Per job: wait_s (the median), wait_low_s..wait_high_s (80 %), wait_bound_s (95 %), and why."""
        bundle, version = self.champion.get()
        with answering():
            return wait_request(payload(**body), bundle, version, trained=self.champion.profiles.get(version))


harden(WaitService)
