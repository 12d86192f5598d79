from kfp import dsl

from jobaware.components.hold import best_hold, sweep_hold, trial_hold
from jobaware.pipelines.common import read_and_check, tracked, train_and_publish


@dsl.pipeline(name="jobaware-hold",
              description="HTCondor holds: ingest event logs, validate, sweep, train the best, register, promote")
def hold_pipeline(data: str, params: str = "{}", tracking_uri: str = "", bad_record_budget: float = 0.01,
                  truth: str = "", sweep_space: str = "") -> str:
    read, checked = read_and_check("hold", data, bad_record_budget)
    trials = tracked(sweep_hold(params=params, space=sweep_space, tracking_uri=tracking_uri).after(checked))
    with dsl.ParallelFor(trials.output, parallelism=2) as trial:
        outcome = tracked(trial_hold(dataset=read.outputs["dataset"], trial=trial, truth=truth,
                                     tracking_uri=tracking_uri))
    best = tracked(best_hold(outcomes=dsl.Collected(outcome.output), tracking_uri=tracking_uri))
    return train_and_publish("hold", read, checked, best.output, data, truth, tracking_uri).output
