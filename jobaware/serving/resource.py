"""BentoML service for `resource`: is this job script CPU-, memory-, network- or I/O-bound? Parsed, never run."""

from jobaware.resource import service as resource
from jobaware.serving.base import Route, service

ResourceService = service(
    "resource", "Classify job scripts from their syntax tree; pair jobs whose bottlenecks differ.", resource.LIMITS,
    Route("/classify", resource.ClassifyRequest, resource.classify),
    Route("/pairing", resource.PairingRequest, resource.pairing), key="resource")
