from kfp import dsl

from pipelines.failure import failure_pipeline


@dsl.pipeline(name="jobaware-all", description="Every capability's pipeline; the others join as they land")
def all_pipeline(failure_data: str, failure_params: str = "{}", tracking_uri: str = ""):
    failure_pipeline(data=failure_data, params=failure_params, tracking_uri=tracking_uri)
