from kfp import dsl
from kfp.dsl import Dataset, Output

from components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def ingest_failure(data: str, jobs: Output[Dataset]) -> str:
    """Read an NREL (CSV/JSON/Parquet) or SWF job file into the canonical table; return its contract name."""
    from jobaware.failure.steps import ingest_step

    report = ingest_step(data, jobs.path)
    jobs.metadata.update({k: report[k] for k in ("rows", "bad_rows")})
    return report["contract"]
