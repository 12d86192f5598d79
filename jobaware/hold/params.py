"""Parameters of a `hold` training run (and of each sweep trial): types, ranges and defaults, checked first."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from jobaware.capabilities import validate_params

Count = Annotated[int, Field(strict=True)]
Real = Annotated[float, Field(allow_inf_nan=False)]


class Params(BaseModel):
    """The tensor shape, the network and its training, the baselines, the split and the label rule."""

    model_config = ConfigDict(extra="forbid")

    # tensors: j jobs x m frames of timeframe_len seconds
    j: Annotated[Count, Field(ge=1, le=100)] = 16
    m: Annotated[Count, Field(ge=1, le=100)] = 24
    timeframe_len: Annotated[Count, Field(ge=10, le=86400)] = 300
    # the network over the frame sequence
    network: Literal["lstm", "gru", "conv"] = "lstm"
    layers: Annotated[Count, Field(ge=1, le=4)] = 1
    hidden_size: Annotated[Count, Field(ge=4, le=512)] = 32
    embedding_dim: Annotated[Count, Field(ge=1, le=64)] = 8
    dropout: Annotated[Real, Field(ge=0, lt=1)] = 0.1
    learning_rate: Annotated[Real, Field(gt=0, le=1)] = 3e-3
    weight_decay: Annotated[Real, Field(ge=0, le=1)] = 1e-4
    batch_size: Annotated[Count, Field(ge=8, le=8192)] = 128
    epochs: Annotated[Count, Field(ge=1, le=500)] = 15
    patience: Annotated[Count, Field(ge=1, le=100)] = 4
    # the tree baseline on static and count features
    gbt_max_iter: Annotated[Count, Field(ge=10, le=5000)] = 200
    gbt_learning_rate: Annotated[Real, Field(gt=0, le=1)] = 0.1
    # the rule baseline: a typical SYSTEM_PERIODIC_RELEASE
    policy_codes: list[Annotated[Count, Field(ge=0, le=1000)]] = Field(default_factory=lambda: [12, 13, 21, 26, 34])
    policy_max_releases: Annotated[Count, Field(ge=0, le=100)] = 3
    # split, metric, labels
    test_fraction: Annotated[Real, Field(gt=0, lt=0.9)] = 0.25
    validation_fraction: Annotated[Real, Field(gt=0, lt=0.9)] = 0.2
    primary_metric: Literal["f1_remove", "f1_release", "roc_auc", "pr_auc", "balanced_accuracy"] = "f1_remove"
    nonzero_exit_is_failure: bool = False
    max_decisions: Annotated[Count, Field(ge=100, le=10_000_000)] = 200_000
    # CPU threads of torch and the trees: 1 suits trials run side by side (and shared machines)
    threads: Annotated[Count, Field(ge=1, le=256)] = 1
    seed: Annotated[Count, Field(ge=0, le=2**32 - 1)] = 0

    @model_validator(mode="after")
    def _split_leaves_training_data(self) -> Params:
        if self.test_fraction + self.validation_fraction >= 0.9:
            raise ValueError("test_fraction + validation_fraction must stay below 0.9")
        return self


def check_params(raw: dict[str, Any] | None) -> dict[str, Any]:
    """Defaults filled in; unknown keys and bad values refused with one line naming them."""
    return validate_params(Params, raw, "hold")
