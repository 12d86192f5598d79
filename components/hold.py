"""`hold`'s own components: the hyper-parameter sweep (trial sets, one trial, the best)."""

from kfp import dsl
from kfp.dsl import Dataset, Input

from components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def sweep_hold(params: str, space: str) -> list:
    """Trial parameter sets of the search space (empty: the bundled one), the run's own params pinned."""
    from jobaware.hold.steps import sweep_trials

    return sweep_trials(params, space)


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def trial_hold(dataset: Input[Dataset], trial: str, truth: str) -> str:
    """One trial: train on the training holds, select on validation; its parameters and metrics."""
    from jobaware.hold.steps import trial_step

    return trial_step(dataset.path, trial, truth)


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def best_hold(outcomes: list) -> str:
    """The parameters of the trial with the best validation metric."""
    from jobaware.hold.steps import best_step

    return best_step(outcomes)
