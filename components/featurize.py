from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def featurize_failure(jobs: Input[Dataset], params: str, features: Output[Dataset]):
    """Submit-time features, labels and the time-ordered split."""
    from jobaware.failure.steps import featurize_step

    features.metadata["train_rows"] = featurize_step(jobs.path, features.path, params)
