"""Registration of `hold`: an HTCondor job went on hold — release it or remove it?"""

from jobaware.capabilities import Capability, Ref
from jobaware.hold.params import Params

# Bump whenever the tensors or features a model is fed change: a bundle built by other feature code is refused.
FEATURE_VERSION = "3"
# (name, higher is better): what the promotion gate compares, the main term of the choice of the decision-maker
# (jobaware.hold.deciders): the mean cost per hold (a wrong removal weighing wrong_remove_cost wrong releases)
# with every workflow weighing the same, on the evaluation holds (real ended holds where there are enough)
PRIMARY_METRIC = ("cost", False)
MIN_EVAL_ROWS = 100

EXAMPLE_LOG = (
    "000 (4242.000.000) 2026-01-05 10:00:00 Job submitted from host: <10.0.0.1:9618?addrs=10.0.0.1-9618>\n...\n"
    "001 (4242.000.000) 2026-01-05 10:01:00 Job executing on host: <10.0.0.2:9618?addrs=10.0.0.2-9618>\n...\n"
    "012 (4242.000.000) 2026-01-05 10:30:00 Job was held.\n"
    "\tTransfer input files failure at execution point slot1@node2 using protocol osdf.\n"
    "\tCode 13 Subcode 256\n...\n"
)

CAPABILITY = Capability(
    key="hold",
    question="an HTCondor job went on hold: release it or remove it?",
    params=Params,
    primary_metric=PRIMARY_METRIC[0],
    higher_is_better=PRIMARY_METRIC[1],
    min_eval_rows=MIN_EVAL_ROWS,
    feature_version=FEATURE_VERSION,
    ingest=Ref("jobaware.hold.reader:ingest"),
    synth=Ref("jobaware.hold.synth:write_synthetic"),
    default_data=Ref("jobaware.hold.synth:default_data"),
    signature=Ref("jobaware.hold.bundle:signature"),
    input_example=Ref("jobaware.hold.bundle:input_example"),
    score=Ref("jobaware.hold.train:score"),
    predict_file=Ref("jobaware.hold.service:predict_file"),
    service="jobaware.serving.hold:HoldService",
    pipeline="jobaware.pipelines.hold:hold_pipeline",
    formats=("HTCondor job event logs (global EVENT_LOG or user logs)",),
    example=("/hold-decision", {"cluster": 4242, "proc": 0, "log": EXAMPLE_LOG}),
    smoke=(12_000, {"j": 6, "m": 8, "hidden_size": 8, "embedding_dim": 4, "epochs": 3, "batch_size": 256,
                    "gbt_max_iter": 30, "folds": 3, "bootstrap": 200}),
    commands=Ref("jobaware.hold.commands:register"),
    train=Ref("jobaware.hold.train:train"),
    metrics_table=("grouped_accuracy", "low", "high", "worst_accuracy", "accuracy", "cost", "worst_cost",
                   "admissible", "roc_auc", "margin", "cost_margin"),
    trivial_baselines={"release_all": "release every hold", "remove_all": "remove every held job"},
)
