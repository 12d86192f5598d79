"""`similarity`'s part of the job card: the past jobs whose I/O behaved most like this one's."""

from __future__ import annotations

from jobaware.card import Missing, NotApplicable

TOP = 5  # similar jobs on a card


def answer(context: dict, ask) -> dict:
    """The most similar jobs of the pool (`/similar`), where the job has I/O codings there."""
    jobid = context.get("similarity_jobid")
    if jobid is None:
        raise NotApplicable("no I/O coding for this job")
    try:
        answer = ask.post("/similar", {"jobid": jobid, "top_k": TOP})
    except Missing as missing:
        if missing.status == "refused" and "unknown job" in (missing.reason or ""):
            raise NotApplicable(f"job {jobid} has no I/O coding in the pool") from None
        raise
    similar = [{"jobid": r["jobid"], "similarity": r["similarity"]} for r in answer["results"][:TOP]]
    return {"similar": similar, "model_version": answer.get("model_version") or answer.get("index_version")}


def shown(part: dict) -> str:
    """`4711 (0.93), 815 (0.90)`."""
    return ", ".join(f"{s['jobid']} ({s['similarity']:.2f})" for s in part["similar"])
