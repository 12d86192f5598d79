from jobaware.pipelines.common import one_step_pipeline

wait_pipeline = one_step_pipeline(
    "wait", "Queue wait: ingest, validate, featurize the queue at each submit, fit and calibrate, register, promote")
