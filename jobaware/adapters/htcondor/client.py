"""The hold service over HTTP: `POST /hold-decision`, failing open (`jobaware.adapters.common.services.FailOpen`: a
timeout, a back-off while the service is down that ends the moment it answers again, one warning per outage; with
the site's service token, an answer that does not prove it is the deployment's hold service counts as an outage)."""

from __future__ import annotations

import logging

from jobaware import metrics
from jobaware.adapters.common.services import FailOpen
from jobaware.card import Reply

log = logging.getLogger("jobaware.adapters.htcondor")


class DecisionClient:
    """Asks `hold` about one held job: a Reply whose answer holds `p_release`, or why there is none (the caller
    then does nothing)."""

    def __init__(self, url: str, timeout: float = 5.0, backoff_s: float = 5.0, backoff_max_s: float = 300.0,
                 series: metrics.Group | None = None):
        self.services = FailOpen({"hold": url}, timeout, backoff_s=backoff_s, backoff_max_s=backoff_max_s, log=log,
                                 series=series, adapter="htcondor")

    def decide(self, cluster: int, proc: int, subproc: int, log_text: bytes) -> Reply:
        body = {"cluster": cluster, "proc": proc, "subproc": subproc, "log": log_text.decode("utf-8", "replace")}
        reply = self.services.post("hold", "/hold-decision", body)
        if reply.status == "ok" and "p_release" not in reply.answer:
            return Reply("error", reason="the service answered 200 without p_release", code=reply.code)
        return reply

    def close(self) -> None:
        self.services.close()
