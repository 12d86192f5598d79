"""BentoML service for `resource`: is this job script CPU-, memory-, network- or I/O-bound? Parsed, never run."""

from __future__ import annotations

import bentoml

from jobaware.resource.service import ServiceLimits, classify_request, pairing_request, request_models
from serving.base import ChampionFollower, answering, harden, payload, request_body

CLASSIFY, PAIRING = request_models(ServiceLimits())
ClassifyRequest = request_body("ClassifyRequest", CLASSIFY)
PairingRequest = request_body("PairingRequest", PAIRING)


@bentoml.service(name="jobaware-resource", traffic={"timeout": 60})
class ResourceService:
    """Classify job scripts from their syntax tree; pair jobs whose bottlenecks differ."""

    def __init__(self) -> None:
        self.champion = ChampionFollower("resource")

    def __is_ready__(self) -> bool:
        return self.champion.ready

    @bentoml.api(route="/classify", input_spec=ClassifyRequest)
    def classify(self, **body) -> dict:
        """Each script's class, probabilities and deciding features."""
        bundle, version = self.champion.get()
        with answering():
            return classify_request(payload(**body), bundle, version, trained=self.champion.profiles.get(version))

    @bentoml.api(route="/pairing", input_spec=PairingRequest)
    def pairing(self, **body) -> dict:
        """Each job's class (given or classified) and the pairs whose bottlenecks differ."""
        bundle, version = self.champion.get()
        with answering():
            return pairing_request(payload(**body), bundle, version, trained=self.champion.profiles.get(version))


harden(ResourceService)
