"""Registration of `similarity`: which past jobs had I/O behaviour like this one?"""

from jobaware.capabilities import Capability, CardPart, Ref
from jobaware.similarity.params import Params

# Bump whenever the index's tables or algorithms change: an index built by other code is refused.
FEATURE_VERSION = "1"
PRIMARY_METRIC = "precision_at_k"
MIN_EVAL_ROWS = 50

CAPABILITY = Capability(
    key="similarity",
    question="which past jobs had I/O behaviour like this one?",
    params=Params,
    primary_metric=PRIMARY_METRIC,
    higher_is_better=True,
    min_eval_rows=MIN_EVAL_ROWS,
    feature_version=FEATURE_VERSION,
    ingest=Ref("jobaware.similarity.reader:ingest"),
    synth=Ref("jobaware.similarity.synth:write_synthetic"),
    default_data=Ref("jobaware.similarity.synth:default_data"),
    signature=Ref("jobaware.similarity.bundle:signature"),
    input_example=Ref("jobaware.similarity.bundle:input_example"),
    score=Ref("jobaware.similarity.train:score"),
    predict_file=Ref("jobaware.similarity.service:predict_file"),
    service="jobaware.serving.similarity:SimilarityService",
    pipeline="jobaware.pipelines.similarity:similarity_pipeline",
    formats=("DKRZ Mistral codings: binary (job_codings_binary.csv) and quantised (job_codings.csv)",),
    example=("/similar", {"coding": "0:256:272:0", "top_k": 5}),
    smoke=(6000, {"eval_references": 60, "eval_pool_jobs": 5000, "timing": False}),
    commands=Ref("jobaware.similarity.commands:register"),
    train=Ref("jobaware.similarity.train:train"),
    metrics_table=("precision_at_k", "self_match_rate", "references", "pool_jobs"),
    card=CardPart(answer=Ref("jobaware.similarity.card:answer"), shown=Ref("jobaware.similarity.card:shown")),
)
