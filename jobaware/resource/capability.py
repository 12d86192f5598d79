"""Registration of `resource`: is this job script CPU-, memory-, network- or I/O-bound?"""

from jobaware.capabilities import Capability, CardPart, Ref
from jobaware.resource.params import Params

# Bump whenever the script features change: a bundle built by other feature code is refused.
FEATURE_VERSION = "resource-features-1"
PRIMARY_METRIC = ("macro_f1", True)  # name, higher is better
MIN_EVAL_ROWS = 60

CAPABILITY = Capability(
    key="resource",
    question="is this job script CPU-, memory-, network- or I/O-bound? (parsed, never run)",
    params=Params,
    primary_metric=PRIMARY_METRIC[0],
    higher_is_better=PRIMARY_METRIC[1],
    min_eval_rows=MIN_EVAL_ROWS,
    feature_version=FEATURE_VERSION,
    ingest=Ref("jobaware.resource.reader:ingest"),
    synth=Ref("jobaware.resource.synth:write_synthetic"),
    default_data=Ref("jobaware.resource.synth:default_data"),
    signature=Ref("jobaware.resource.bundle:signature"),
    input_example=Ref("jobaware.resource.bundle:input_example"),
    score=Ref("jobaware.resource.train:score"),
    predict_file=Ref("jobaware.resource.service:predict_file"),
    service="jobaware.serving.resource:ResourceService",
    pipeline="jobaware.pipelines.resource:resource_pipeline",
    formats=("job scripts (Python, batch shell): files, folders", "labels.csv with file,class"),
    example=("/classify", {"scripts": [{"name": "solve.py", "text": (
        "import numpy as np\n"
        "a = np.random.rand(2000, 2000)\n"
        "for _ in range(50):\n"
        "    a = a @ a.T / 2000\n"
        "print(a.sum())\n")}]}),
    smoke=(200, {"cv_repeats": 1, "candidates": ["rich"]}),
    commands=Ref("jobaware.resource.commands:register"),
    train=Ref("jobaware.resource.train:train"),
    service_memory=("1Gi", "3Gi"),
    metrics_table=("macro_f1", "macro_f1_std", "f1_cpu", "f1_mem", "f1_network", "f1_io"),
    card=CardPart(answer=Ref("jobaware.resource.card:answer"), shown=Ref("jobaware.resource.card:shown"),
                  words=Ref("jobaware.resource.card:words")),
)
