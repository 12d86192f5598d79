from kfp import dsl
from kfp.dsl import Dataset, Input, Model, Output

from components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def train_failure(
    features: Input[Dataset],
    jobs: Input[Dataset],
    contract_report: Input[Dataset],
    params: str,
    data: str,
    tracking_uri: str,
    model: Output[Model],
) -> str:
    """Fit the calibrated model; log it to MLflow; return the MLflow run id."""
    from jobaware.failure.steps import train_step, use_tracking

    use_tracking(tracking_uri)
    return train_step(features.path, jobs.path, params, contract_report.path, data, model.path)
