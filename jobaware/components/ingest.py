from kfp import dsl
from kfp.dsl import Dataset, Output

from jobaware.components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def ingest(key: str, data: str, dataset: Output[Dataset]):
    """Read the source files (paths or object-store URIs) into the capability's canonical dataset folder."""
    from jobaware.steps import ingest

    report = ingest(key, data, dataset.path)
    dataset.metadata.update({"rows": report.rows, "bad_rows": report.bad_rows})
