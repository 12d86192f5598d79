"""BentoML service for `failure`: will this Slurm job fail, and how?"""

from jobaware.failure import service as failure
from jobaware.serving.base import Route, service

FailureService = service(
    "failure", "Will this Slurm job fail, and how? Jobs in the canonical schema or as squeue --json records.",
    failure.LIMITS, Route("/predict", failure.PredictRequest, failure.predict, answer_model=failure.Predictions,
                          inline_bytes=failure.INLINE_BYTES),
    key="failure", threads=4)
