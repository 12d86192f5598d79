"""Co-scheduling hints: which pending jobs should share a node, which should be kept apart.

Stated rule: jobs bound by different resources interfere little and may share a node; jobs bound by the
same resource compete for it and should be kept apart. Each job carries probabilities over cpu, mem,
network, io (a given class counts as certain). For a pair, p_same = sum over classes of p_a(c)·p_b(c),
p_different = 1 - p_same.
- keep_apart: every pair with p_same >= `threshold`, most certain first.
- share_node: a matching (each job in at most one pair) built greedily from the pairs with
  p_different >= `threshold`, most certain first (ties: earlier jobs first) — a plan a scheduler can apply
  as is; greedy matching is within a factor 2 of the best total.
- Jobs classed `other` (nothing binds) or `not_a_job` (never ends) take part in no pair; they are listed in
  `unpaired` with the reason.
"""

from __future__ import annotations

import numpy as np

from jobaware.resource.schema import BINDING


def plan(jobs: list[dict], threshold: float = 0.5, max_pairs: int = 1000) -> dict:
    """`jobs`: dicts with `id`, `class` and `probabilities` (binding classes). Returns the hints."""
    paired = [j for j in jobs if j["class"] in BINDING]
    unpaired = [{"id": j["id"], "class": j["class"],
                 "reason": "never ends by design" if j["class"] == "not_a_job" else "no binding resource"}
                for j in jobs if j["class"] not in BINDING]
    probabilities = np.array([[j["probabilities"].get(c, 0.0) for c in BINDING] for j in paired]).reshape(-1, 4)
    same = probabilities @ probabilities.T
    first, second = np.triu_indices(len(paired), k=1)
    p_same = same[first, second]
    apart = np.flatnonzero(p_same >= threshold)
    apart = apart[np.lexsort((second[apart], first[apart], -p_same[apart]))]
    share = np.flatnonzero(1 - p_same >= threshold)
    share = share[np.lexsort((second[share], first[share], p_same[share]))]
    matched: set[int] = set()
    share_node = []
    for k in share:
        a, b = int(first[k]), int(second[k])
        if a in matched or b in matched:
            continue
        matched.update((a, b))
        share_node.append({"jobs": [paired[a]["id"], paired[b]["id"]],
                           "classes": [paired[a]["class"], paired[b]["class"]],
                           "p_different": round(float(1 - p_same[k]), 6)})
    keep_apart = [{"jobs": [paired[int(first[k])]["id"], paired[int(second[k])]["id"]],
                   "classes": [paired[int(first[k])]["class"], paired[int(second[k])]["class"]],
                   "p_same": round(float(p_same[k]), 6)} for k in apart[:max_pairs]]
    return {"share_node": share_node, "keep_apart": keep_apart, "keep_apart_truncated": bool(len(apart) > max_pairs),
            "unpaired": unpaired}
