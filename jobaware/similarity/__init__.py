"""`similarity`: rank every job by I/O similarity to a reference job (Betke & Kunkel's six algorithms).

Modules (the lead's wiring calls these):
  schema      formats of the Mistral tables, canonical tables and their contracts' names
  reader      `ingest(sources, out_dir, strict=, progress=)`, `read_tables(path)`
  synth       `write_synthetic(out, n, seed, fmt, progress, tables=, family_share=)`: generated pools, all
              tables; `default_data`, `real_sample`
  algorithms  the six definitions (with sources) and their vectorised kernels
  index       `SimilarityIndex.build/from_tables/save/load`, `.scores/.query/.consensus/.job/.reference`
  params      `Params`, `check_params`
  bundle      `SimilarityBundle` (the registered model), `signature()`, `input_example(bundle)`
  evaluate    `PRIMARY_METRIC`, `MIN_EVAL_ROWS`, `make_eval`, `evaluate`, `timings`
  train       `build`, `train(dataset_dir, params, workdir) -> (bundle, Evaluation)`, `score(bundle, eval_dir)`
  report      `report(index, reference, out, ...) -> (html, pngs)`, `evaluation_plots`
  service     `Limits`, `SimilarBody`, `JobBody`, `similar_to` and `job` (the routes), `similar` (CLI), `open_index`,
              `predict_file`
"""
