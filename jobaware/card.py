"""The job card: one answer per job from the services, part by part, each part with its model version.

A card asks `failure` (`/predict`, the job's squeue or canonical record), `resource` (`/classify`, the batch
script; `/pairing` against the classes of other jobs when given) and `similarity` (`/similar`, where the job has
I/O codings in the pool), each over HTTP with a timeout. A part whose service is down, slow or refuses the request
says so (`status` and `reason`) instead of failing the card; a part the job cannot have (no script, no I/O coding)
is `not_applicable`. `short(card)` is the one line an adapter writes into the job's comment.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import httpx

from jobaware.errors import JobawareError

PARTS = ("failure", "resource", "similarity")
SHORT_MAX = 200  # characters of the comment line


def _part(status: str, reason: str | None = None, **fields) -> dict:
    return {"status": status, "reason": reason, **fields}


def _ask(client: httpx.Client, url: str, route: str, body: dict) -> tuple[dict | None, dict | None]:
    """(answer, None) or (None, the part that says why there is none)."""
    try:
        response = client.post(f"{url.rstrip('/')}{route}", json=body)
    except httpx.HTTPError as exc:
        return None, _part("unavailable", f"{url}{route}: {type(exc).__name__}")
    if response.status_code >= 500:
        return None, _part("unavailable", f"{url}{route}: HTTP {response.status_code}")
    try:
        answer = response.json()
    except ValueError:
        return None, _part("error", f"{url}{route}: HTTP {response.status_code}, not JSON")
    if response.status_code != 200:
        message = answer.get("error") if isinstance(answer, dict) else None
        return None, _part("refused", f"HTTP {response.status_code}: {str(message or answer)[:200]}")
    return answer, None


def failure_part(client: httpx.Client, url: str, record: dict) -> dict:
    answer, missing = _ask(client, url, "/predict", {"jobs": [record]})
    if missing:
        return missing
    prediction = answer["predictions"][0]
    part = _part("ok", p_fail=prediction["p_fail"], likely=prediction["most_likely_failure"],
                 model_version=answer["model_version"])
    if prediction.get("threshold") is not None:  # the operating threshold registered with the model
        part.update(threshold=prediction["threshold"], likely_fail=prediction["likely_fail"])
    return part


def resource_part(client: httpx.Client, url: str, script: str | None, job_id, neighbours: list[dict]) -> dict:
    if not script:
        return _part("not_applicable", "no batch script")
    answer, missing = _ask(client, url, "/classify", {"scripts": [{"name": f"job-{job_id}", "text": script}]})
    if missing:
        return missing
    result = answer["results"][0]
    part = _part("ok", binding=result["class"], probabilities=result["probabilities"],
                 model_version=answer["model_version"])
    if neighbours and result["class"] in ("cpu", "mem", "network", "io"):
        jobs = [{"id": str(job_id), "class": result["class"]}] + [{"id": str(n["id"]), "class": n["class"]}
                                                                  for n in neighbours if n.get("class")]
        pairing, _ = _ask(client, url, "/pairing", {"jobs": jobs}) if len(jobs) > 1 else (None, None)
        pairs = [p["jobs"] for p in (pairing or {}).get("share_node", []) if str(job_id) in p["jobs"]]
        part["pair_with"] = [b if a == str(job_id) else a for a, b in pairs]
    return part


def similarity_part(client: httpx.Client, url: str, jobid: int | None, top: int) -> dict:
    if jobid is None:
        return _part("not_applicable", "no I/O coding for this job")
    answer, missing = _ask(client, url, "/similar", {"jobid": jobid, "top_k": top})
    if missing:
        if missing["status"] == "refused" and "unknown job" in (missing["reason"] or ""):
            return _part("not_applicable", f"job {jobid} has no I/O coding in the pool")
        return missing
    similar = [{"jobid": r["jobid"], "similarity": r["similarity"]} for r in answer["results"][:top]]
    return _part("ok", similar=similar, model_version=answer.get("model_version") or answer.get("index_version"))


def make_card(job_id, record: dict, script: str | None, urls: dict[str, str], *, similarity_jobid: int | None = None,
              neighbours: list[dict] | None = None, timeout: float = 5.0, top: int = 5,
              skip: set[str] | frozenset = frozenset()) -> dict:
    """The card of one job: every part asked (but those in `skip`, marked unavailable), each answered or marked
    missing with the reason."""
    asks = {
        "failure": lambda client: failure_part(client, urls["failure"], record),
        "resource": lambda client: resource_part(client, urls["resource"], script, job_id, neighbours or []),
        "similarity": lambda client: similarity_part(client, urls["similarity"], similarity_jobid, top),
    }
    with httpx.Client(timeout=timeout) as client:
        parts = {name: _part("unavailable", "backed off after a failure") if name in skip else ask(client)
                 for name, ask in asks.items()}
    card = {"job_id": job_id, "created": time.time(), "parts": parts,
            "missing": [name for name, part in parts.items() if part["status"] not in ("ok", "not_applicable")]}
    card["short"] = short(card)
    return card


def short(card: dict) -> str:
    """The comment line: `jobaware: p(fail)=0.71 TIMEOUT likely; io-bound; pair with 12,13`."""
    failure, resource = card["parts"]["failure"], card["parts"]["resource"]
    pieces = []
    if failure["status"] == "ok":
        risky = failure.get("likely_fail")
        risky = failure["p_fail"] >= 0.5 if risky is None else risky  # a model without a registered threshold
        pieces.append(f"p(fail)={failure['p_fail']:.2f}" + (f" {failure['likely']} likely" if risky else ""))
    else:
        pieces.append("failure risk unknown")
    if resource["status"] == "ok":
        pieces.append(f"{resource['binding']}-bound" if resource["binding"] in ("cpu", "mem", "network", "io")
                      else resource["binding"].replace("_", " "))
        if resource.get("pair_with"):
            pieces.append("pair with " + ",".join(resource["pair_with"]))
    return ("jobaware: " + "; ".join(pieces))[:SHORT_MAX]


def audit(record: dict, path: str | Path) -> None:
    """Append one audit record (JSON Lines, flushed and synced): who, when, what, why, model versions."""
    entry = {"at": time.time(), "host": socket.gethostname(), "uid": os.getuid(), **record}
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, default=str, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise JobawareError(f"audit log {path}: {exc.strerror or exc}") from None


def versions(card: dict) -> dict[str, str]:
    """The model version of every part that has one."""
    return {name: part["model_version"] for name, part in card["parts"].items() if part.get("model_version")}
