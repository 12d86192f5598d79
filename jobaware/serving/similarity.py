"""BentoML service for `similarity`: which past jobs had I/O behaviour like this one?"""

from jobaware.serving.base import Route, service
from jobaware.similarity import service as similarity

SimilarityService = service(
    "similarity", "Rank every job of the indexed pool by I/O similarity to a reference job.", similarity.LIMITS,
    Route("/similar", similarity.SimilarBody, similarity.similar_to),
    Route("/job", similarity.JobBody, similarity.job), key="similarity", timeout=120)
