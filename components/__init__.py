"""KFP components, each a thin wrapper over one `jobaware` step function: the generic steps every capability
shares, one module per verb (`ingest`, `validate`, `train`, `register`, `promote`, taking the key), and a capability's
own steps in a module named by its key (`hold`: the sweep)."""

import os

# The image every component and service runs in (see Dockerfile); override when compiling for a registry.
IMAGE = os.environ.get("JOBAWARE_IMAGE", "ghcr.io/jobaware/jobaware:0.1.0")
