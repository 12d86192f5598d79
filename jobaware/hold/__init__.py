"""`hold`: a job went on hold; release it or remove it? Learned from HTCondor job event logs.

Modules (each a step the platform wires):
  reader    the streaming event-log reader -> the canonical `condor_events` table (ingest, read_events)
  labels    one decision per hold (012) and its label (release / remove)
  features  e x m x j event-state tensors, static and count features, known at hold time
  synth     a synthetic global event log in the exact text format, with the true P(release) per hold;
            write_synthetic and default_data for the registry
  model     the networks (LSTM, GRU, 1-D convolution) and their training with early stopping
  baselines the tree baseline and the SYSTEM_PERIODIC_RELEASE rule
  evaluate  metrics over whole evaluation sets, the decision threshold, plots
  train     split, train, evaluate, run_trial / best_trial for the sweep, score for the promotion gate
  sweep     a YAML search space -> seeded trial parameter sets (pinned_trials: with the run's own)
  bundle    the registered artefact (HoldBundle.predict), its signature and input example
  service   request handling of POST /hold-decision, predict_file
  commands  the logic of `jobaware hold parse` and `jobaware hold label`
  steps     the sweep's KFP steps (sweep_step, trial_step, best_step)
"""
