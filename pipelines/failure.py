from kfp import dsl

from components.evaluate import evaluate_failure
from components.featurize import featurize_failure
from components.ingest import ingest_failure
from components.promote import promote
from components.register import register
from components.train import train_failure
from components.validate import validate


@dsl.pipeline(name="jobaware-failure", description="Slurm job failure: ingest, validate, featurize, train, evaluate, register, promote")
def failure_pipeline(data: str, params: str = "{}", truth: str = "", tracking_uri: str = ""):
    jobs = ingest_failure(data=data)
    checked = validate(jobs=jobs.outputs["jobs"], contract=jobs.outputs["Output"])
    features = featurize_failure(jobs=jobs.outputs["jobs"], params=params).after(checked)
    trained = train_failure(
        features=features.outputs["features"], jobs=jobs.outputs["jobs"], contract_report=checked.outputs["report"],
        params=params, data=data, tracking_uri=tracking_uri,
    )
    evaluated = evaluate_failure(
        run_id=trained.outputs["Output"], model=trained.outputs["model"], features=features.outputs["features"],
        params=params, data=data, truth=truth, tracking_uri=tracking_uri,
    )
    version = register(key="failure", run_id=trained.outputs["Output"], tracking_uri=tracking_uri).after(evaluated)
    promote(key="failure", version=version.output, tracking_uri=tracking_uri)
