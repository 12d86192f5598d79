"""`resource`: what binds a job script — CPU, memory, network or I/O — read from its syntax, never run.

Modules: `reader` (labels.csv + files -> `labelled_scripts`), `parsing` (any bytes -> tree or tokens, with a
status), `python2`, `lexer`, `shell` (batch scripts), `jobness` (not_a_job), `features`, `catalog`, `model`,
`sequence` (torch), `evaluate` (group-aware repeated CV), `train` (Params, train, score), `bundle`,
`pairing`, `service` (request handling, CLI logic), `synth` (generator).
"""

from jobaware.resource.bundle import ResourceBundle, input_example, signature
from jobaware.resource.reader import ingest
from jobaware.resource.schema import CLASSES, CONTRACT, KEY
from jobaware.resource.train import MIN_EVAL_ROWS, PRIMARY_METRIC, Evaluation, Params, score, train

__all__ = ["CLASSES", "CONTRACT", "KEY", "MIN_EVAL_ROWS", "PRIMARY_METRIC", "Evaluation", "Params",
           "ResourceBundle", "ingest", "input_example", "score", "signature", "train"]
