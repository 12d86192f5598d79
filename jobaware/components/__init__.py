"""KFP components, each a thin wrapper over one `jobaware` step function: the generic steps every capability
shares, one module per verb (`ingest`, `validate`, `train`, `register`, `promote`, taking the key), and a capability's
own steps in a module named by its key (`hold`: the sweep)."""

import os

from jobaware import __version__

# The image every component and service runs in (see Dockerfile): a site's own, pushed to its registry, named in
# JOBAWARE_IMAGE when compiling or submitting (k8s/README.md). The default is a placeholder under example.org, a
# domain no one can register: a pipeline compiled without it fails to pull, where a plausible public name would
# pull whatever someone published under it.
IMAGE = os.environ.get("JOBAWARE_IMAGE", f"registry.example.org/jobaware:{__version__}")
