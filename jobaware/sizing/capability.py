"""Registration of `sizing`: what time limit and memory should this job ask for?"""

from jobaware.capabilities import Capability, CardPart, Ref
from jobaware.sizing.params import SizingParams

# Bump whenever the features a model is fed change: a bundle trained with other feature code is never
# scored or served through this code.
FEATURE_VERSION = "sizing-1"

CAPABILITY = Capability(
    key="sizing",
    question="what time limit and memory should this job ask for, to fit within them with a stated probability?",
    params=SizingParams,
    primary_metric="quantile_loss",
    higher_is_better=False,
    min_eval_rows=1000,
    feature_version=FEATURE_VERSION,
    ingest=Ref("jobaware.sizing.reader:ingest"),
    synth=Ref("jobaware.sizing.synth:write_synthetic"),
    default_data=Ref("jobaware.sizing.synth:default_data"),
    signature=Ref("jobaware.sizing.bundle:signature"),
    input_example=Ref("jobaware.sizing.bundle:input_example"),
    score=Ref("jobaware.sizing.train:score"),
    predict_file=Ref("jobaware.sizing.service:predict_file"),
    service="jobaware.serving.sizing:SizingService",
    pipeline="jobaware.pipelines.sizing:sizing_pipeline",
    formats=("Standard Workload Format (.swf, .swf.gz)", "HTCondor job event logs (memory: the terminate events)",
             "a site's job store (the Slurm collector's, with accounting)"),
    example=("/size", {"jobs": [{"job_id": 1, "user": "user1", "procs": 8, "time_asked_s": 86400}]}),
    smoke=(6000, {"max_iter": 40}),
    train=Ref("jobaware.sizing.train:train"),
    from_store=Ref("jobaware.store.export:from_store"),
    gate_size=Ref("jobaware.sizing.train:gate_size"),
    metrics_table=("quantile_loss", "under_rate", "median_ratio", "released_share", "released_proc_hours",
                   "mem_under_rate", "mem_median_ratio"),
    trivial_baselines={"request": "the job's own request times one factor, fitted on the training jobs for the "
                                  "same coverage"},
    card=CardPart(answer=Ref("jobaware.sizing.card:answer"), shown=Ref("jobaware.sizing.card:shown"),
                  words=Ref("jobaware.sizing.card:words"), advice=Ref("jobaware.sizing.card:advice"),
                  accuracy=Ref("jobaware.sizing.accuracy:accuracy_report")),
)
