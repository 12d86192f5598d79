from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output

from components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def evaluate_failure(
    run_id: str,
    model: Input[Model],
    features: Input[Dataset],
    params: str,
    data: str,
    truth: str,
    tracking_uri: str,
    scores: Output[Metrics],
    plots: Output[Dataset],
):
    """Model and baselines on the later jobs; metrics and plots go to the MLflow run."""
    import os

    from jobaware.failure.steps import evaluate_step, use_tracking

    use_tracking(tracking_uri)
    os.makedirs(plots.path, exist_ok=True)
    results = evaluate_step(run_id, model.path, features.path, params, data, truth, plots.path)
    for name, values in results.items():
        for metric, value in values.items():
            if isinstance(value, (int, float)) and value == value:
                scores.log_metric(f"{name}.{metric}", float(value))
