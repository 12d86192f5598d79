"""`hold`'s own components: the hyper-parameter sweep (trial sets, one trial, the best)."""

from kfp import dsl
from kfp.dsl import Dataset, Input

from jobaware.components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def sweep_hold(params: str, space: str, tracking_uri: str) -> list:
    """Trial parameter sets of the search space (empty: the bundled one), the run's own params pinned;
    opens the sweep's MLflow run."""
    from jobaware.hold.steps import sweep_step
    from jobaware.steps import use_tracking

    use_tracking(tracking_uri)
    return sweep_step(params, space)


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def trial_hold(dataset: Input[Dataset], trial: str, truth: str, tracking_uri: str) -> str:
    """One trial: train on the training holds, select on validation; a run nested under the sweep's."""
    from jobaware.hold.steps import trial_step
    from jobaware.steps import use_tracking

    use_tracking(tracking_uri)
    return trial_step(dataset.path, trial, truth)


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def best_hold(outcomes: list, tracking_uri: str) -> str:
    """The parameters of the trial with the best validation metric, recorded on the sweep's run."""
    from jobaware.hold.steps import best_step
    from jobaware.steps import use_tracking

    use_tracking(tracking_uri)
    return best_step(outcomes)
