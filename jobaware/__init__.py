"""jobaware: job awareness for HPC schedulers."""

import os
from importlib.metadata import version

__version__ = version("jobaware")  # pyproject.toml's, the one place it is written

# Cluster services do not phone home: MLflow telemetry and BentoML usage tracking are off unless asked for.
for _name in ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK", "BENTOML_DO_NOT_TRACK"):
    os.environ.setdefault(_name, "true")
