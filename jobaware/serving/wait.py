"""BentoML service for `wait`: when will this job start?"""

from jobaware.serving.base import Route, service
from jobaware.wait import service as wait

WaitService = service(
    "wait", "When will a job start? A point, an 80 % range and a 95 % bound, from the queue as it stands.", wait.LIMITS,
    Route("/wait", wait.WaitRequest, wait.wait), key="wait")
