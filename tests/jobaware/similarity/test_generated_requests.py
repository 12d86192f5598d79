"""Generated requests that reach the index: pool jobids and inline references of consistent shape built by
Hypothesis, with any algorithm that can compare them, top_k and consensus, each answered with a ranking.

The OpenAPI fuzz of the service rarely gets here: a body valid by the document names a jobid the pool does not
hold, or metrics of unequal length. `make fuzz` runs `JOBAWARE_FUZZ_EXAMPLES` of these."""

from __future__ import annotations

import json
import math

from hypothesis import assume, given
from hypothesis import strategies as st

from jobaware.similarity import service
from jobaware.similarity.algorithms import ALGORITHMS, NEEDS
from jobaware.similarity.schema import LEVEL_MAX, METRICS, SCORE_MAX, SYMBOL_MAX
from tests.fuzzing import examples, fuzz_settings
from tests.jobaware.similarity.conftest import similar_request


def _sequence(values: list[int], as_text: bool):
    return ":".join(map(str, values)) if as_text else values


@st.composite
def inline_references(draw) -> tuple[dict, set[str]]:
    """(the inline fields, the reference fields they give): a coding, levels of as many segments, values."""
    fields = draw(st.sets(st.sampled_from(service.INLINE), min_size=1))
    segments = draw(st.integers(1, 40))
    body = {}
    if "coding" in fields:
        body["coding"] = _sequence(draw(st.lists(st.integers(0, SYMBOL_MAX), min_size=segments, max_size=segments)),
                                   draw(st.booleans()))
    if "levels" in fields:
        as_text = draw(st.booleans())
        body["levels"] = {metric: _sequence(draw(st.lists(st.integers(0, LEVEL_MAX), min_size=segments, max_size=segments)),
                                            as_text) for metric in METRICS}
    if "values" in fields:
        count = draw(st.integers(8, 60))
        number = st.floats(0, SCORE_MAX, allow_nan=False)
        body["values"] = {metric: draw(st.lists(number, min_size=count, max_size=count)) for metric in METRICS}
    return body, fields


@st.composite
def similar_bodies(draw, index) -> dict:
    """A `POST /similar` body the index can answer: a pool job or an inline reference, with algorithms whose
    table that reference has."""
    if draw(st.booleans()):
        jobid = draw(st.sampled_from(index.jobids.tolist()))
        reference = index.reference(jobid)
        body, fields = {"jobid": jobid}, {f for f in service.INLINE if getattr(reference, f) is not None}
    else:
        body, fields = draw(inline_references())
    usable = [a for a in ALGORITHMS if service.REFERENCE_FIELD[NEEDS[a]] in fields]
    assume(usable)  # a pool job with no table at all: nothing can compare it
    choice = draw(st.sampled_from(["default", "algorithm", "consensus"]))
    if choice == "algorithm" or (choice == "default" and "b-aggz" not in usable):
        body["algorithm"] = draw(st.sampled_from(usable))
    elif choice == "consensus":
        body["consensus"] = draw(st.lists(st.sampled_from(usable), min_size=1, max_size=len(usable), unique=True))
    if draw(st.booleans()):
        body["top_k"] = draw(st.integers(1, 1000))
    return body


def test_every_generated_request_the_index_can_answer_gets_a_ranking(bundle):
    index = bundle.index
    pool = set(index.jobids.tolist())

    @fuzz_settings(examples(40))
    @given(body=similar_bodies(index))
    def check(body):
        answer = similar_request(bundle, body)
        json.dumps(answer, allow_nan=False)
        results = answer["results"]
        assert [r["rank"] for r in results] == list(range(1, len(results) + 1))
        assert len(results) <= body.get("top_k", bundle.top_k) and len({r["jobid"] for r in results}) == len(results)
        assert {r["jobid"] for r in results} <= pool
        similarities = [r["similarity"] for r in results]
        assert all(math.isfinite(s) and 0 <= s <= 1 for s in similarities)
        assert similarities == sorted(similarities, reverse=True)
        if "consensus" not in body:
            assert answer["comparable"] + answer["not_comparable"] == index.size
            assert len(results) == min(answer["comparable"], body.get("top_k", bundle.top_k))

    check()
