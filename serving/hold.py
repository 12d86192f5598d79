"""BentoML service for `hold`: a held HTCondor job — release it or remove it?"""

from __future__ import annotations

import bentoml

from jobaware.hold.service import Limits, decide, parse_request, request_model
from serving.base import ChampionFollower, answering, harden, payload, request_body

LIMITS = Limits.from_env()
HoldRequest = request_body("HoldRequest", request_model(LIMITS))


@bentoml.service(name="jobaware-hold", traffic={"timeout": 60})
class HoldService:
    """Release or remove a held job, decided from the event log around it."""

    def __init__(self) -> None:
        self.champion = ChampionFollower("hold")

    def __is_ready__(self) -> bool:
        return self.champion.ready

    @bentoml.api(route="/hold-decision", input_spec=HoldRequest)
    def hold_decision(self, **body) -> dict:
        """P(release), the decision and the hold reason for a held job, from the event log around it."""
        bundle, version = self.champion.get()
        with answering():
            return decide(bundle, parse_request(payload(**body), LIMITS), version,
                          trained=self.champion.profiles.get(version))


harden(HoldService)
