"""The most expensive valid `/similar` and `/job` requests the limits allow are answered within 2 s and 1 MiB."""

from harness.worst_cases import check_bounded, similarity_cases
from jobaware.similarity.bundle import SimilarityBundle
from tests.jobaware.similarity.conftest import job_request, similar_request


def test_the_worst_requests_are_bounded(generated_index):
    bundle = SimilarityBundle(generated_index, "b-aggz", top_k=5, workers=0)  # as the service holds it
    bundle.warm()
    routes = {"/similar": lambda body: similar_request(bundle, body),
              "/job": lambda body: job_request(bundle, body)}
    over = check_bounded(None, similarity_cases(generated_index), routes)
    assert not over, over
