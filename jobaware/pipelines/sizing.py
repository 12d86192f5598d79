from jobaware.pipelines.common import one_step_pipeline

sizing_pipeline = one_step_pipeline(
    "sizing", "Time limit and memory to ask for: ingest, validate, featurize, fit and calibrate, register, promote")
