from jobaware.pipelines.common import one_step_pipeline

similarity_pipeline = one_step_pipeline(
    "similarity", "I/O similarity of jobs: ingest codings, validate, build and evaluate the index, register, promote")
