"""Registration of `failure`: will this Slurm job fail, and how?"""

from jobaware.capabilities import Capability, CardPart, Ref
from jobaware.failure.params import FailureParams

# Bump whenever the features a model is fed change: a bundle trained with other feature code is never
# scored or served through this code.
FEATURE_VERSION = "6"
# The gate (README: "The gate's minimum"): at least MIN_EVAL_ROWS completed or failed test jobs, and a challenger
# whose ROC-AUC is not below the champion's by more than GATE_MARGIN at the 90 % interval's low end (DeLong's)
MIN_EVAL_ROWS = 200
GATE_MARGIN = 0.01

CAPABILITY = Capability(
    key="failure",
    question="will this Slurm job fail, and how (FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL)?",
    params=FailureParams,
    primary_metric="roc_auc",
    higher_is_better=True,
    min_eval_rows=MIN_EVAL_ROWS,
    feature_version=FEATURE_VERSION,
    ingest=Ref("jobaware.failure.reader:ingest"),
    synth=Ref("jobaware.failure.synth:write_synthetic"),
    default_data=Ref("jobaware.failure.synth:default_data"),
    signature=Ref("jobaware.failure.bundle:signature"),
    input_example=Ref("jobaware.failure.bundle:input_example"),
    score=Ref("jobaware.failure.train:score"),
    predict_file=Ref("jobaware.failure.service:predict_file"),
    service="jobaware.serving.failure:FailureService",
    pipeline="jobaware.pipelines.failure:failure_pipeline",
    formats=("NREL Eagle jobs: CSV, JSON, Parquet", "Standard Workload Format (.swf)", "squeue --json"),
    example=("/predict", {"jobs": [{
        "job_id": 1, "user": "user0001", "account": "account0001", "partition": "partition002", "qos": "normal",
        "wallclock_req": 3600.0, "nodes_req": 2, "processors_req": 72, "gpus_req": 0, "mem_req": 0.0,
        "submit_time": "2019-03-01 10:00:00"}]}),
    smoke=(6000, {"max_iter": 40}),
    from_store=Ref("jobaware.failure.export:from_store"),
    commands=Ref("jobaware.failure.commands:register"),
    train=Ref("jobaware.failure.train:train"),
    gate_size=Ref("jobaware.failure.train:gate_size"),
    compare=Ref("jobaware.failure.train:compare"),
    gate_margin=GATE_MARGIN,
    service_memory=("1Gi", "3Gi"),
    metrics_table=("roc_auc", "pr_auc", "threshold", "accuracy", "majority_accuracy", "fail_f1", "ece", "brier"),
    card=CardPart(answer=Ref("jobaware.failure.card:answer"), shown=Ref("jobaware.failure.card:shown"),
                  words=Ref("jobaware.failure.card:words"), advice=Ref("jobaware.failure.card:advice"),
                  hold=Ref("jobaware.failure.card:hold"), accuracy=Ref("jobaware.failure.accuracy:accuracy_report"),
                  required=True),
)
