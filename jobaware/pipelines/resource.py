from jobaware.pipelines.common import one_step_pipeline

resource_pipeline = one_step_pipeline(
    "resource", "What binds a job script: ingest labelled scripts, validate, cross-validate and fit, register, promote")
