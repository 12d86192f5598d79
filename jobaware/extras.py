"""The package's extras by role (pyproject.toml), read from the installed package's own metadata, and the one line a
command gives where the install lacks the extra it needs: `this command needs jobaware[train]: pip install
'jobaware[train]'`, never a traceback.

The base install is the light one (the daemons, the plugins, the card, the reports); `train`, `serve`, `reports`,
`htcondor` and `kafka` add what a role needs. A command that needs an extra says so before it starts (`require`); an
import of a missing package anywhere else is named by the first extra of ORDER that brings it (`for_module`,
what the command contract reports).
"""

from __future__ import annotations

from functools import cache
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from jobaware.errors import JobawareError

# the extra a missing package is named by: the first that brings it (the commands that need `reports` alone say so)
ORDER = ("htcondor", "kafka", "train", "serve", "reports")
# the declared distribution a top-level module comes with, where their names differ (joblib and threadpoolctl come
# with scikit-learn, the KFP client's modules with kfp, uvicorn and starlette with bentoml)
DISTRIBUTIONS = {"sklearn": "scikit-learn", "htcondor2": "htcondor", "confluent_kafka": "confluent-kafka",
                 "great_expectations": "great-expectations", "yaml": "pyyaml", "joblib": "scikit-learn",
                 "threadpoolctl": "scikit-learn", "kfp_server_api": "kfp", "docker": "kfp", "urllib3": "kfp",
                 "uvicorn": "bentoml", "starlette": "bentoml"}


class MissingExtra(JobawareError):
    """The install lacks an extra the command needs."""


@cache
def extras() -> dict[str, frozenset[str]]:
    """Each extra of the installed package (ORDER's, in that order) with the canonical names of the distributions
    it brings; empty where jobaware's metadata cannot be read."""
    try:
        requirements = [Requirement(text) for text in metadata.requires("jobaware") or []]
    except metadata.PackageNotFoundError:
        return {}
    return {extra: frozenset(canonicalize_name(r.name) for r in requirements
                             if r.marker is not None and r.marker.evaluate({"extra": extra}) and r.name != "jobaware")
            for extra in ORDER}


def installed(distribution: str) -> bool:
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def message(names: list[str]) -> str:
    wanted = f"jobaware[{','.join(names)}]"
    return f"this command needs {wanted}: pip install '{wanted}'"


def require(*names: str) -> None:
    """Raise MissingExtra (one line naming them) unless every distribution of each extra in `names` is installed."""
    lacking = [name for name in names if not all(installed(d) for d in extras().get(name, ()))]
    if lacking:
        raise MissingExtra(message(lacking))


def for_module(module: str | None) -> str | None:
    """The extra that brings the top-level package of a module that could not be imported (`kfp.dsl` -> train); None
    when its distribution is installed (a module missing inside it is another fault) or no extra brings it."""
    top = (module or "").partition(".")[0]
    distribution = canonicalize_name(DISTRIBUTIONS.get(top, top))
    if not top or installed(distribution):
        return None
    return next((extra for extra, brought in extras().items() if distribution in brought), None)
