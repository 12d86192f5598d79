"""`failure`'s own components: featurize, train, evaluate."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output

from components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def featurize_failure(dataset: Input[Dataset], params: str, features: Output[Dataset]):
    """Submit-time features, labels and the time-ordered split."""
    from jobaware.failure.steps import featurize_step

    features.metadata["train_rows"] = featurize_step(dataset.path, features.path, params)


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def train_failure(features: Input[Dataset], dataset: Input[Dataset], validation: Input[Dataset], params: str,
                  data: str, tracking_uri: str, model: Output[Model]) -> str:
    """Fit the calibrated model; log it to MLflow; return the MLflow run id."""
    from jobaware.failure.steps import train_step
    from jobaware.steps import use_tracking

    use_tracking(tracking_uri)
    return train_step(features.path, dataset.path, params, validation.path, data, model.path)


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def evaluate_failure(run_id: str, model: Input[Model], features: Input[Dataset], params: str, data: str, truth: str,
                     tracking_uri: str, scores: Output[Metrics], evaluation: Output[Dataset]):
    """Model and baselines on the later jobs; metrics, plots and the gate's evaluation data go to the run."""
    from jobaware.failure.steps import evaluate_step
    from jobaware.steps import use_tracking

    use_tracking(tracking_uri)
    results = evaluate_step(run_id, model.path, features.path, params, data, truth, evaluation.path)
    for name, values in results.items():
        for metric, value in values.items():
            if isinstance(value, (int, float)) and value == value:
                scores.log_metric(f"{name}.{metric}", float(value))
