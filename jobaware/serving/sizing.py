"""BentoML service for `sizing`: what time limit and memory should this job ask for?"""

from jobaware.serving.base import Route, service
from jobaware.sizing import service as sizing

SizingService = service(
    "sizing", "Recommend a time limit and memory per processor each job fits within with the stated probability.",
    sizing.LIMITS, Route("/size", sizing.SizeRequest, sizing.size), key="sizing")
