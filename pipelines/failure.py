from kfp import dsl

from components.failure import evaluate_failure, featurize_failure, train_failure
from components.promote import promote
from components.register import register
from pipelines.common import read_and_check, tracked, uncached


@dsl.pipeline(name="jobaware-failure",
              description="Slurm job failure: ingest, validate, featurize, train, evaluate, register, promote")
def failure_pipeline(data: str, params: str = "{}", tracking_uri: str = "", bad_record_budget: float = 0.01,
                     truth: str = "") -> str:
    read, checked = read_and_check("failure", data, bad_record_budget)
    features = uncached(featurize_failure(dataset=read.outputs["dataset"], params=params).after(checked))
    trained = tracked(train_failure(
        features=features.outputs["features"], dataset=read.outputs["dataset"], validation=checked.outputs["report"],
        params=params, data=data, tracking_uri=tracking_uri,
    ))
    evaluated = tracked(evaluate_failure(
        run_id=trained.outputs["Output"], model=trained.outputs["model"], features=features.outputs["features"],
        params=params, data=data, truth=truth, tracking_uri=tracking_uri,
    ))
    version = tracked(register(key="failure", run_id=trained.outputs["Output"], tracking_uri=tracking_uri)
                      .after(evaluated))
    tracked(promote(key="failure", version=version.output, tracking_uri=tracking_uri))
    return version.output
