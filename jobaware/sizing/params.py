"""Parameters of a `sizing` training run: types, ranges and defaults, checked before anything trains."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jobaware.capabilities import validate_params

Count = Annotated[int, Field(strict=True)]
Fraction = Annotated[float, Field(allow_inf_nan=False)]


class SizingParams(BaseModel):
    """The stated probability, what the allocation minimises, the trees, their calibration and the time-ordered
    split."""

    model_config = ConfigDict(extra="forbid")

    # the share of all jobs that fit within their recommendation: the under-estimation rate aimed at is 1 - coverage
    coverage: Annotated[Fraction, Field(ge=0.5, le=0.999)] = 0.95
    # what the recommendations minimise at that rate: the median recommended / asked, the mean of it ("jobs"), or
    # the processor-hours recommended ("proc_hours")
    objective: Literal["median", "jobs", "proc_hours"] = "median"
    # the trees (these rank jobs as well as ten times as many trees on the real traces: bench/sizing_frontier.py)
    learning_rate: Annotated[Fraction, Field(gt=0, le=1)] = 0.2
    max_iter: Annotated[Count, Field(ge=1, le=5000)] = 40
    max_leaf_nodes: Annotated[Count, Field(ge=2, le=4096)] = 15
    min_samples_leaf: Annotated[Count, Field(ge=1, le=1_000_000)] = 40
    l2_regularization: Annotated[Fraction, Field(ge=0, le=1e6)] = 1.0
    # the latest share of the training jobs, held out from the trees: they calibrate the first days
    calibration_fraction: Annotated[Fraction, Field(gt=0, lt=1)] = 0.2
    # each day is calibrated on this many jobs that ended last before the day began
    calibration_jobs: Annotated[Count, Field(ge=100, le=1_000_000)] = 5000
    test_fraction: Annotated[Fraction, Field(gt=0, lt=1)] = 0.3
    # the trees are fitted on at most this many of the earliest training jobs (a seeded uniform sample of them)
    max_train_rows: Annotated[Count, Field(ge=1000, le=100_000_000)] = 200_000
    seed: Annotated[Count, Field(ge=0, le=2**32 - 1)] = 0


def check_params(raw: dict[str, Any] | None) -> dict[str, Any]:
    """Parameters with defaults filled in; unknown keys and bad values refused with what was expected."""
    return validate_params(SizingParams, raw, "sizing")
