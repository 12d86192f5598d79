"""KFP components: one module per step verb, each a thin wrapper over `jobaware`."""

import os

# The image every component and service runs in (see Dockerfile); override when compiling for a registry.
IMAGE = os.environ.get("JOBAWARE_IMAGE", "ghcr.io/jobaware/jobaware:0.1.0")
