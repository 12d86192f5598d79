from typing import NamedTuple

from kfp import dsl

from pipelines.failure import failure_pipeline
from pipelines.hold import hold_pipeline
from pipelines.resource import resource_pipeline
from pipelines.similarity import similarity_pipeline
from pipelines.wait import wait_pipeline

Versions = NamedTuple("Versions", [("failure", str), ("hold", str), ("similarity", str), ("resource", str),
                                   ("wait", str)])


@dsl.pipeline(name="jobaware-all", description="Every capability's pipeline, each on its own data")
def all_pipeline(failure_data: str, hold_data: str, similarity_data: str, resource_data: str, wait_data: str,
                 failure_params: str = "{}", hold_params: str = "{}", similarity_params: str = "{}",
                 resource_params: str = "{}", wait_params: str = "{}", tracking_uri: str = "",
                 bad_record_budget: float = 0.01) -> Versions:
    common = {"tracking_uri": tracking_uri, "bad_record_budget": bad_record_budget}
    return Versions(
        failure=failure_pipeline(data=failure_data, params=failure_params, **common).output,
        hold=hold_pipeline(data=hold_data, params=hold_params, **common).output,
        similarity=similarity_pipeline(data=similarity_data, params=similarity_params, **common).output,
        resource=resource_pipeline(data=resource_data, params=resource_params, **common).output,
        wait=wait_pipeline(data=wait_data, params=wait_params, **common).output,
    )
