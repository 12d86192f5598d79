"""BentoML service for `hold`: a held HTCondor job — release it or remove it?"""

from __future__ import annotations

from typing import Any

import bentoml
from pydantic import Field

from jobaware.hold.service import Limits, decide, parse_request
from serving.base import ChampionFollower, answering, harden, payload


@bentoml.service(name="jobaware-hold", traffic={"timeout": 60})
class HoldService:
    """Release or remove a held job, decided from the event log around it."""

    def __init__(self) -> None:
        self.champion = ChampionFollower("hold")
        self.limits = Limits.from_env()

    def __is_ready__(self) -> bool:
        return self.champion.ready

    @bentoml.api(route="/hold-decision")
    def hold_decision(
        self,
        cluster: Any = Field(None, description="the held job's cluster id"),
        proc: Any = Field(None, description="its proc id (default 0)"),
        subproc: Any = Field(None, description="its subproc id (default 0)"),
        log: Any = Field(None, description="the event log around it, as text"),
        path: Any = Field(None, description="or a log path under JOBAWARE_HOLD_LOG_DIR"),
    ) -> dict:
        bundle, version = self.champion.get()
        with answering():
            request = parse_request(payload(cluster=cluster, proc=proc, subproc=subproc, log=log, path=path),
                                    self.limits)
            return decide(bundle, request, version)


harden(HoldService)
