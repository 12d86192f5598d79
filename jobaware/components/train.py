from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output

from jobaware.components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def train(key: str, dataset: Input[Dataset], validation: Input[Dataset], params: str, data: str, truth: str,
          tracking_uri: str, model: Output[Model], scores: Output[Metrics]) -> str:
    """Fit and evaluate with the capability's own `train`; log everything to MLflow; return the run id."""
    import math
    import tempfile

    from jobaware.steps import train_step, use_tracking

    use_tracking(tracking_uri)
    with tempfile.TemporaryDirectory() as workdir:
        run_id, metrics = train_step(key, dataset.path, params, validation.path, data, truth, workdir, model.path)
    for name, value in metrics.items():
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            scores.log_metric(name, float(value))
    return run_id
