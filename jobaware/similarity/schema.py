"""The DKRZ Mistral job I/O codings: metrics, source formats and the canonical tables of `similarity`.

Monitoring (Betke & Kunkel): every 5 s per node and Lustre file system, nine I/O metrics; each metric is
cut into 10-minute segments and every segment's mean is categorised LowIO = 0 (up to the 99 % quantile),
HighIO = 1, CriticalIO = 4 (above the 99.9 % quantile). The codings are built from those scores:

- binary coding: one 9-bit mask 0..511 per segment; a metric's bit is set when the sum of its scores over
  nodes and file systems is > 0. Bit values: md_file_create=1, md_file_delete=2, md_mod=4, md_other=8,
  md_read=16, read_bytes=32, read_calls=64, write_bytes=128, write_calls=256.
- zero-aggregated binary coding (`coding_abs_aggzeros`): every run of all-zero segments collapsed to one 0.
- quantised coding: per metric and segment the mean score over nodes and file systems (`<metric>_float`,
  in [0, 4]) and its level 0..16. Level rule (stated here, used by the generator): level = 0 when the mean
  is below 1/8 (NonIO), else min(16, floor(4 * mean + 1/2)), i.e. 16 levels of width 1/4 centred on
  1/4, 1/2, ..., 4. Readers accept any levels 0..16 (they do not re-derive levels from the floats).
- node values (defined by jobaware for the KS algorithm): per job, node and metric the per-segment score
  averaged over the file systems (so in [0, 4]; with two file systems one of 0, .5, 1, 2, 2.5, 4).

Source files (CSV, header line first, `,` separated, no quoting, LF or CRLF line ends, optionally .gz/.bz2/.xz):

| kind | header (any column order) | canonical table (contract) |
|---|---|---|
| binary codings | `coding,jobid` | `mistral_codings` |
| quantised codings (job_codings.csv) | `jobid`, nine `<metric>_float`, nine `<metric>`, `coding_abs`, `coding_abs_aggzeros` | `mistral_levels` |
| job metadata | `jobid,user,group,nodes,elapsed,job_name` | `mistral_jobs` |
| node values | `jobid,node`, nine `<metric>` | `mistral_node_values` |
| planted families (generated data only) | `jobid,family,variant` | `mistral_families` |

Every sequence is `:`-separated, one value per segment. `elapsed` is in seconds, or Slurm's `[D-]HH:MM:SS`.
A node-values row holds one node's series; a job has one row per node, in any order; all nine sequences of
a row have the same length. The canonical tables keep the sequences as the source's text (checked), with
`jobid` (and `nodes`, `elapsed`, `family`) as integers.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

METRICS = (
    "md_file_create", "md_file_delete", "md_mod", "md_other", "md_read",
    "read_bytes", "read_calls", "write_bytes", "write_calls",
)
BIT = {metric: 1 << i for i, metric in enumerate(METRICS)}
SYMBOL_MAX = (1 << len(METRICS)) - 1
LEVEL_MAX = 16
SCORE_MAX = 4.0
SEGMENT_SECONDS = 600
# longest job accepted anywhere (segments of 10 minutes: about 69 days); the real sample's longest is 433
MAX_SEGMENTS = 10_000
MAX_NAME = 256

CODINGS, LEVELS, JOBS, NODE_VALUES, FAMILIES = (
    "mistral_codings", "mistral_levels", "mistral_jobs", "mistral_node_values", "mistral_families")
FLOATS = tuple(f"{m}_float" for m in METRICS)

COLUMNS = {
    CODINGS: ("jobid", "coding"),
    LEVELS: ("jobid", *FLOATS, *METRICS, "coding_abs", "coding_abs_aggzeros"),
    JOBS: ("jobid", "user", "group", "nodes", "elapsed", "job_name"),
    NODE_VALUES: ("jobid", "node", *METRICS),
    FAMILIES: ("jobid", "family", "variant"),
}
# the column order each generated source file is written in (the binary file as the real one)
SOURCE_COLUMNS = {**COLUMNS, CODINGS: ("coding", "jobid")}
INTEGER_COLUMNS = {"jobid", "nodes", "elapsed", "family"}

SCHEMAS = {
    table: pa.schema([(c, pa.int64() if c in INTEGER_COLUMNS else pa.string()) for c in columns])
    for table, columns in COLUMNS.items()
}


def table_of_header(names: list[str]) -> str | None:
    """The table a source file holds, from its header's column names (any order), or None."""
    found = set(names)
    for table, columns in COLUMNS.items():
        if found == set(columns) and len(names) == len(columns):
            return table
    return None


def aggregate_zeros(coding: np.ndarray) -> np.ndarray:
    """The coding with every run of zero segments collapsed to one zero."""
    coding = np.asarray(coding)
    if coding.size == 0:
        return coding
    keep = np.ones(coding.size, bool)
    keep[1:] = ~((coding[1:] == 0) & (coding[:-1] == 0))
    return coding[keep]


def aggregate_zeros_flat(values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`aggregate_zeros` of many sequences at once, given as flat values and offsets (len n+1)."""
    keep = np.ones(values.size, bool)
    if values.size:
        keep[1:] = ~((values[1:] == 0) & (values[:-1] == 0))
        starts = offsets[:-1][np.diff(offsets) > 0]
        keep[starts] = True  # a sequence's first segment is always kept
    kept_before = np.concatenate([[0], np.cumsum(keep)])
    return values[keep], kept_before[offsets].astype(np.int64)


def quantise(mean: np.ndarray) -> np.ndarray:
    """Levels 0..16 of mean scores in [0, 4] (see the module docstring for the rule)."""
    mean = np.asarray(mean, dtype=np.float64)
    level = np.minimum(LEVEL_MAX, np.floor(4.0 * mean + 0.5))
    return np.where(mean < 0.125, 0, level).astype(np.uint8)


def format_sequence(values) -> str:
    """A sequence as the sources write it: `:`-separated, integers without a decimal point."""
    out = []
    for v in np.asarray(values).tolist():
        out.append(str(int(v)) if float(v).is_integer() else repr(float(v)))
    return ":".join(out)
