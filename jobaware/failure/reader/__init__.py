"""Readers for `failure`'s job records: NREL Eagle (CSV, JSON, Parquet), SWF traces and live Slurm records.

Every reader yields canonical batches plus the problems it met; bad records are skipped and reported
with file and line, never fatal unless the caller asks for strict mode.
"""

from jobaware.failure.reader.dispatch import contract_for, ingest, iter_batches, read_jobs
from jobaware.jobtable.common import Batch

__all__ = ["Batch", "contract_for", "ingest", "iter_batches", "read_jobs"]
