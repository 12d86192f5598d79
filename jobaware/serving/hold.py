"""BentoML service for `hold`: a held HTCondor job — release it or remove it?"""

from jobaware.hold import service as hold
from jobaware.serving.base import Route, service

HoldService = service("hold", "Release or remove a held job, decided from the event log around it.", hold.LIMITS,
                      Route("/hold-decision", hold.HoldRequest, hold.hold_decision), key="hold")
