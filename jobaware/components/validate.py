from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from jobaware.components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def validate(dataset: Input[Dataset], bad_record_budget: float, report: Output[Dataset]):
    """Hold every table to its contract and the bad records to the budget; a failure stops the pipeline here."""
    from jobaware.steps import validate_step

    validate_step(dataset.path, report.path, bad_record_budget)
