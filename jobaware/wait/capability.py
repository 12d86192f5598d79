"""Registration of `wait`: when will this job start?"""

from jobaware.capabilities import Capability, CardPart, Ref
from jobaware.wait.params import WaitParams

# Bump whenever the features a model is fed change: a bundle trained with other feature code is never
# scored or served through this code.
FEATURE_VERSION = "wait-2"

CAPABILITY = Capability(
    key="wait",
    question="when will this job start? (a point, an 80 % range and a 95 % bound, calibrated)",
    params=WaitParams,
    primary_metric="within_x2",
    higher_is_better=True,
    min_eval_rows=500,
    feature_version=FEATURE_VERSION,
    ingest=Ref("jobaware.wait.reader:ingest"),
    synth=Ref("jobaware.wait.synth:write_synthetic"),
    default_data=Ref("jobaware.wait.synth:default_data"),
    signature=Ref("jobaware.wait.bundle:signature"),
    input_example=Ref("jobaware.wait.bundle:input_example"),
    score=Ref("jobaware.wait.train:score"),
    predict_file=Ref("jobaware.wait.service:predict_file"),
    train=Ref("jobaware.wait.train:train"),
    from_store=Ref("jobaware.store.export:from_store"),
    gate_size=Ref("jobaware.wait.train:gate_size"),
    service="jobaware.serving.wait:WaitService",
    pipeline="jobaware.pipelines.wait:wait_pipeline",
    formats=("Standard Workload Format traces (.swf, .swf.gz)", "a site's job store (the Slurm collector's)"),
    example=("/wait", {"time": "2024-01-01 09:10:00", "cluster": "example", "jobs": [
        {"job_id": 3, "user": "alice", "queue": "batch", "processors_req": 8, "wallclock_req": 600}],
        "running": [{"job_id": 1, "user": "alice", "queue": "batch", "processors_req": 64, "wallclock_req": 7200,
                     "submit_time": "2024-01-01 09:00:00", "start_time": "2024-01-01 09:00:00"}],
        "pending": [{"job_id": 2, "user": "bob", "queue": "batch", "processors_req": 32, "wallclock_req": 3600,
                     "submit_time": "2024-01-01 09:05:00"}]}),
    smoke=(4000, {"max_iter": 30}),
    service_memory=("1Gi", "3Gi"),
    metrics_table=("within_x2", "within_10min", "median_abs_error_s", "coverage_80", "coverage_95",
                   "bound_tightness"),
    trivial_baselines={"zero": "always a wait of 0 s", "training_median": "always the training jobs' median wait"},
    card=CardPart(answer=Ref("jobaware.wait.card:answer"), shown=Ref("jobaware.wait.card:shown"),
                  words=Ref("jobaware.wait.card:words"), accuracy=Ref("jobaware.wait.accuracy:accuracy_report"),
                  refresh_s=300.0),
)
