"""`all`: every registered capability's pipeline, each on its own data, built from the registry (a capability joins
by registering; nothing here names one). Its parameters: `<key>_data` and `<key>_params` for each capability, then
the tracking URI and the bad-record budget they share; it returns each one's registered version by key."""

import inspect
from typing import NamedTuple

from kfp import dsl

from jobaware import capabilities
from jobaware.pipelines.runner import pipeline

KEYS = capabilities.keys()
PIPELINES = {key: pipeline(key) for key in KEYS}  # imported before `all` is built: KFP nests no pipeline definitions
Versions = NamedTuple("Versions", [(key, str) for key in KEYS])


def _every_pipeline(*args, **kwargs) -> Versions:
    bound = _every_pipeline.__signature__.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = bound.arguments
    common = {"tracking_uri": arguments["tracking_uri"], "bad_record_budget": arguments["bad_record_budget"]}
    return Versions(**{key: PIPELINES[key](data=arguments[f"{key}_data"], params=arguments[f"{key}_params"],
                                          **common).output for key in KEYS})


def _parameter(name: str, annotation: type, default=inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation, default=default)


_every_pipeline.__signature__ = inspect.Signature(
    [*(_parameter(f"{key}_data", str) for key in KEYS), *(_parameter(f"{key}_params", str, "{}") for key in KEYS),
     _parameter("tracking_uri", str, ""), _parameter("bad_record_budget", float, 0.01)], return_annotation=Versions)
all_pipeline = dsl.pipeline(name="jobaware-all", description="Every capability's pipeline, each on its own data")(
    _every_pipeline)
