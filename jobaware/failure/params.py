"""Parameters of a `failure` training run: types, ranges and defaults, checked before anything trains."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jobaware.capabilities import validate_params

Count = Annotated[int, Field(strict=True)]
Fraction = Annotated[float, Field(allow_inf_nan=False)]


class FailureParams(BaseModel):
    """Gradient-boosted trees, their calibration, the operating threshold, and the time-ordered split."""

    model_config = ConfigDict(extra="forbid")

    learning_rate: Annotated[Fraction, Field(gt=0, le=1)] = 0.06
    max_iter: Annotated[Count, Field(ge=1, le=5000)] = 100
    max_leaf_nodes: Annotated[Count, Field(ge=2, le=4096)] = 31
    min_samples_leaf: Annotated[Count, Field(ge=1, le=1_000_000)] = 40
    l2_regularization: Annotated[Fraction, Field(ge=0, le=1e6)] = 1.0
    calibration: Literal["isotonic", "sigmoid", "none"] = "isotonic"
    # the validation period: the last part of the training sample in time, held out from the trees; the
    # calibrator and the operating threshold are fitted on it (with calibration "none", the threshold only)
    calibration_fraction: Annotated[Fraction, Field(ge=0, lt=1)] = 0.2
    # the operating threshold on P(fail): best failed-class F1, or the most failures caught while at most
    # max_false_alarm_rate of the completed jobs are flagged (see jobaware/failure/operating.py)
    threshold_objective: Literal["f1", "false_alarm"] = "f1"
    max_false_alarm_rate: Annotated[Fraction, Field(gt=0, lt=1)] = 0.05
    test_fraction: Annotated[Fraction, Field(gt=0, lt=1)] = 0.3
    # the model and the baselines are fitted on at most about this many training jobs: each training job is kept
    # with probability max_train_rows / (training jobs), one uniform draw per job in time order from a generator
    # seeded with `seed`; features and evaluation still cover every job
    max_train_rows: Annotated[Count, Field(ge=1000, le=100_000_000)] = 500_000
    # the public traces (jobaware/data/real/failure.public.json) beside a site's own jobs: "extra" adds their labelled jobs to
    # the training side (the model then reads the portable features alone; a trace that is the data itself is left
    # out), "none" trains on the site's jobs alone, "auto" is "extra" unless the data was generated (a generator's
    # truth beside it)
    public_data: Literal["auto", "extra", "none"] = "auto"
    # OpenMP threads the trees are fitted and scored on: on a shared 2-core machine OpenMP's waiting threads cost the
    # public traces' training step 146 s of CPU against 34 s on one thread, for the same model
    threads: Annotated[Count, Field(ge=1, le=256)] = 1
    seed: Annotated[Count, Field(ge=0, le=2**32 - 1)] = 0


def check_params(raw: dict[str, Any] | None) -> dict[str, Any]:
    """Parameters with defaults filled in; unknown keys and bad values refused with what was expected."""
    return validate_params(FailureParams, raw, "failure")
