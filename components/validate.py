from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def validate(jobs: Input[Dataset], contract: str, report: Output[Dataset]):
    """Hold the table to its Great Expectations contract; a failure stops the pipeline here."""
    from jobaware.failure.steps import validate_step

    validate_step(jobs.path, contract, report.path)
