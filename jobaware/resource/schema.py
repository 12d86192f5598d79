"""The `resource` capability's classes and its canonical table, `labelled_scripts`."""

from __future__ import annotations

import pyarrow as pa

KEY = "resource"
CONTRACT = "labelled_scripts"
CLASSES = ("cpu", "mem", "network", "io", "other")
BINDING = ("cpu", "mem", "network", "io")  # what the models learn; `other` is decided by rule (see model.py)
NOT_A_JOB = "not_a_job"

LABELLED_SCRIPTS = pa.schema([
    pa.field("file", pa.string(), nullable=False),  # the script's original name
    pa.field("class", pa.string(), nullable=False),
    pa.field("stored_as", pa.string(), nullable=False),  # path relative to the labels.csv folder
    pa.field("source", pa.string(), nullable=False),  # the labels.csv it was listed in
    pa.field("line", pa.int64(), nullable=False),  # its line there
    pa.field("origin", pa.string(), nullable=False),  # real or synthetic
    pa.field("sha256", pa.string(), nullable=False),  # of the stored bytes
    pa.field("n_bytes", pa.int64(), nullable=False),
    pa.field("truncated", pa.bool_(), nullable=False),  # content holds only the first max_file_bytes
    pa.field("stub", pa.bool_(), nullable=False),
    pa.field("label_conflict", pa.bool_(), nullable=False),
    pa.field("group", pa.string(), nullable=False),  # near-duplicate group: never split across CV folds
    pa.field("usable", pa.bool_(), nullable=False),  # neither stub nor label conflict
    pa.field("content", pa.binary(), nullable=False),
])
TRUTH_FILE = "synthetic_truth.csv"  # written by synth.write_synthetic beside its labels.csv: marks the folder as generated
