"""`resource`: what binds a job script — CPU, memory, network or I/O — read from its syntax, never run.

Modules: `reader` (labels.csv + files -> `labelled_scripts`), `parsing` (any bytes -> tree or tokens, with a
status), `python2`, `lexer`, `shell` (batch scripts), `jobness` (not_a_job), `features`, `catalog`, `model`,
`sequence` (torch), `evaluate` (group-aware repeated CV), `params` (Params), `train` (train, score), `bundle`,
`pairing`, `service` (request handling, CLI logic), `synth` (generator, write_synthetic,
default_data).
"""
