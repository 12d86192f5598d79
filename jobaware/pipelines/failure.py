from jobaware.pipelines.common import one_step_pipeline

failure_pipeline = one_step_pipeline(
    "failure", "Slurm job failure: ingest, validate, featurize, fit and evaluate, register, promote")
