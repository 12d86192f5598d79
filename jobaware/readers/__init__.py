"""Readers for job records: NREL Eagle (CSV, JSON, Parquet), SWF traces and live Slurm records.

Every reader yields canonical batches plus the problems it met; bad records are skipped and reported
with file and line, never fatal unless the caller asks for strict mode.
"""

from jobaware.readers.common import Batch, Problem, ReadReport
from jobaware.readers.dispatch import ingest, iter_batches, read_jobs

__all__ = ["Batch", "Problem", "ReadReport", "ingest", "iter_batches", "read_jobs"]
