"""The most expensive valid `/classify` and `/pairing` requests the limits allow are answered within 2 s and
1 MiB: the request's work budget is shared by its scripts."""

from harness.worst_cases import check_bounded, resource_cases
from tests.jobaware.resource.conftest import classify_request, pairing_request


def test_the_worst_requests_are_bounded(trained):
    bundle = trained[0]
    routes = {"/classify": lambda body: classify_request(body, bundle, "1"),
              "/pairing": lambda body: pairing_request(body, bundle, "1")}
    over = check_bounded(None, resource_cases(bundle), routes)
    assert not over, over


def test_a_script_cut_short_by_the_budget_says_so(trained):
    cases = resource_cases(trained[0])
    name = next(n for n in cases if n.startswith("classify:") and "python scripts of 1,048,576" in n)
    results = classify_request(cases[name][1], trained[0], "1")["results"]
    assert results and all(r["complete"] is False for r in results)
