"""`resource`'s part of the job card: what binds the job's batch script, and which neighbours to share a node with."""

from __future__ import annotations

from jobaware.card import Missing, NotApplicable
from jobaware.resource.schema import BINDING

NAMES = {"cpu": "cpu", "mem": "memory", "network": "network", "io": "io"}  # in words: `memory-bound`


def answer(context: dict, ask) -> dict:
    """The binding class of the job's script (`/classify`) and, among its neighbours, those of another binding
    resource (`/pairing`; left out when that call fails)."""
    script = context.get("script")
    if not script:
        raise NotApplicable("no batch script")
    job_id = str(context.get("job_id"))
    result = ask.post("/classify", {"scripts": [{"name": f"job-{job_id}", "text": script}]})
    classified = result["results"][0]
    part = {"binding": classified["class"], "probabilities": classified["probabilities"],
            "model_version": result["model_version"]}
    neighbours = [(str(n["id"]), _binding(n)) for n in context.get("neighbours") or []]
    neighbours = [{"id": i, "class": c} for i, c in neighbours if c and i != job_id]
    if neighbours and part["binding"] in BINDING:
        try:
            pairing = ask.post("/pairing", {"jobs": [{"id": job_id, "class": part["binding"]}, *neighbours]})
        except Missing:
            pairing = {}
        pairs = [p["jobs"] for p in pairing.get("share_node", []) if job_id in p["jobs"]]
        part["pair_with"] = [b if a == job_id else a for a, b in pairs]
    return part


def _binding(neighbour: dict) -> str | None:
    """A neighbour's binding class: given (`class`), or from its card (`parts`)."""
    if neighbour.get("class"):
        return neighbour["class"]
    said = (neighbour.get("parts") or {}).get("resource") or {}
    return said.get("binding") if said.get("status") == "ok" else None


def words(part: dict, history: dict) -> str | None:
    """`io-bound; pair with 12,13`, `memory-bound`, `other`, `not a job`."""
    if part["status"] != "ok":
        return None
    binding = part["binding"]
    said = f"{NAMES[binding]}-bound" if binding in NAMES else binding.replace("_", " ")
    return said + ("; pair with " + ",".join(part["pair_with"]) if part.get("pair_with") else "")


def shown(part: dict) -> str:
    """`io (0.83); pair with 12, 13`."""
    pairs = f"; pair with {', '.join(part['pair_with'])}" if part.get("pair_with") else ""
    return f"{part['binding']} ({part['probabilities'].get(part['binding'], 0):.2f}){pairs}"
