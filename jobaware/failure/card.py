"""`failure`'s part of the job card, and the one vocabulary of risk every text of the scheduler side uses.

The flag is the model's: a job is flagged when the service says `likely_fail` (P(fail) at or above the operating
threshold registered with the model); nothing here compares P(fail) with a threshold of its own. The words
(`risk`) are decided once, here, for the comment, the card, the advice and the accuracy report:
- `likely`: flagged, and P(fail) at least 50 %, the only case that says "likely":
  `failure risk 71%, TIMEOUT likely`;
- `raised`: flagged below 50 %: the risk beside the site's usual failure share (`failure risk 26% (site usual
  8%)`), or beside the model's threshold where the usual share is not known (`failure risk 26% (threshold 24%)`);
- `low`: not flagged (or a model without a threshold): `failure risk 5%`.

For a job flagged TIMEOUT or OUT_OF_MEMORY the advice gives values instead of a direction where the `sizing`
capability's card part has them: the part asks it (`ask.part`, by its key, the card's one way for a part to ask
another, with no import of its slice) and takes its `remedies` for the likely failure, e.g. `ask for
--mem-per-cpu=2390M: 97 % of jobs like this used less (asked 4096M)`; without that part answering
(not registered, switched off, down) the direction stays.
"""

from __future__ import annotations

from jobaware.card import NotApplicable
from jobaware.failure.schema import FAILURES

LIKELY = 0.5  # "likely" is said only of a risk at least this high (more likely than not, calibrated)
MIN_SITE_JOBS = 20  # finished jobs in the store before their failure share is the site's usual
REMEDIES = {  # what a user can change, by the likely way of failing; {time_minutes}: what the job asked
    "TIMEOUT": "ask for more --time[ than the {time_minutes} minutes asked]",
    "OUT_OF_MEMORY": "ask for more --mem or --mem-per-cpu",
    "NODE_FAIL": "add --requeue so Slurm runs it again",
}
VALUES = "sizing"  # the capability whose card part gives values for the remedies (its `remedies`, by failure)
SIZED = ("TIMEOUT", "OUT_OF_MEMORY")  # the remedies it is asked for
PAST = {"TIMEOUT": "ran out of time", "OUT_OF_MEMORY": "failed", "NODE_FAIL": "failed", "FAILED": "failed"}


def answer(context: dict, ask) -> dict:
    """P(fail), the most likely failure, the model's flag and threshold, for the job's record; for a job flagged
    TIMEOUT or OUT_OF_MEMORY, the `remedy` with values where `sizing`'s part has one."""
    job = context.get("job")
    if not job:
        raise NotApplicable("no job record")
    answer = ask.post("/predict", {"jobs": [job]})
    prediction = answer["predictions"][0]
    part = {"p_fail": prediction["p_fail"], "likely": prediction["most_likely_failure"],
            "model_version": answer["model_version"]}
    if prediction.get("threshold") is not None:  # the operating threshold registered with the model
        part.update(threshold=prediction["threshold"], likely_fail=prediction["likely_fail"])
    if level(part) != "low" and part["likely"] in SIZED:
        sized = ask.part(VALUES, context)
        remedy = (sized.get("remedies") or {}).get(part["likely"]) if sized["status"] == "ok" else None
        if isinstance(remedy, str) and remedy:
            part["remedy"] = remedy
    return part


def level(part: dict) -> str:
    """`likely`, `raised` or `low` (see the module docstring)."""
    if part.get("likely_fail") is not True:
        return "low"
    return "likely" if part["p_fail"] >= LIKELY else "raised"


def percent(share: float) -> str:
    return f"{share * 100:.0f}%"


def usual(history: dict) -> float | None:
    """The site's usual failure share: of the finished jobs the store holds (COMPLETED or a failure), the share
    that failed; None below MIN_SITE_JOBS of them."""
    site = history.get("site") or {}
    failed = sum(site.get(state, 0) for state in FAILURES)
    finished = failed + site.get("COMPLETED", 0)
    return failed / finished if finished >= MIN_SITE_JOBS else None


def risk(part: dict, usual_share: float | None) -> str:
    """The risk in words, the same in the comment, the card, the advice and the report."""
    said = f"failure risk {percent(part['p_fail'])}"
    match level(part):
        case "likely":
            return f"{said}, {part['likely']} likely"
        case "raised" if usual_share is not None:
            return f"{said} (site usual {percent(usual_share)})"
        case "raised":
            return f"{said} (threshold {percent(part['threshold'])})"
    return said


def _seen(part: dict, history: dict) -> tuple[int, int]:
    """Of the finished jobs like this one: how many, and how many ended the way this one is likely to fail (any
    failure, except for TIMEOUT: ran out of time)."""
    ends = [record["final"]["state"] for record in history.get("similar") or []]
    wanted = ("TIMEOUT",) if part["likely"] == "TIMEOUT" else FAILURES
    return len(ends), sum(end in wanted for end in ends)


def words(part: dict, history: dict) -> str | None:
    """`failure risk 26% (site usual 8%); 0/2 similar failed; model 4`."""
    if part["status"] == "not_applicable":
        return None
    if part["status"] != "ok":
        return "failure risk unknown"
    pieces = [risk(part, usual(history))]
    similar = [record["final"]["state"] for record in history.get("similar") or []]
    if similar:
        pieces.append(f"{sum(end in FAILURES for end in similar)}/{len(similar)} similar failed")
    pieces.append(f"model {part['model_version']}")
    return "; ".join(pieces)


def advice(part: dict, history: dict) -> str | None:
    """For a flagged job: the risk, what jobs like it did (never more than the counts say), what to change."""
    if part["status"] != "ok" or level(part) == "low":
        return None
    kind = part["likely"]
    runs, hits = _seen(part, history)
    if hits:
        seen = f": jobs like this one {PAST.get(kind, 'failed')} in {hits} of their last {runs} runs"
        remedy = part.get("remedy") or REMEDIES.get(kind, "check how the last ones ended (sacct) before submitting again")
    else:
        seen = f": none of the last {runs} jobs like this one {PAST.get(kind, 'failed')}" if runs else ""
        remedy = part.get("remedy") or REMEDIES.get(kind, "check the script and its inputs before submitting")
    return f"{risk(part, usual(history))}{seen}; {remedy} (model {part['model_version']})."


def shown(part: dict) -> str:
    """`failure risk 71%, TIMEOUT likely (threshold 30%)`."""
    threshold = f" (threshold {percent(part['threshold'])})" if part.get("threshold") is not None else ""
    return risk(part, None) + (threshold if level(part) != "raised" else "")


def hold(part: dict, site_threshold: float | None) -> str | None:
    """Hold at the site's own threshold when its policy states one, else by the model's flag."""
    if part["status"] != "ok":
        return None
    if site_threshold is not None:
        if part["p_fail"] >= site_threshold:
            return f"failure risk {percent(part['p_fail'])} at or above the site's threshold {percent(site_threshold)}"
        return None
    if part.get("likely_fail") is True:
        return f"failure risk {percent(part['p_fail'])} at or above the model's threshold {percent(part['threshold'])}"
    return None
