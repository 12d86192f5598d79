"""Parameters of a `hold` training run (and of each sweep trial): types, ranges and defaults, checked first."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from jobaware.capabilities import validate_params

Count = Annotated[int, Field(strict=True)]
Real = Annotated[float, Field(allow_inf_nan=False)]


class Params(BaseModel):
    """The tensor shape, the network and its training, the baselines, the evaluation and the label rule."""

    model_config = ConfigDict(extra="forbid")

    # tensors: j jobs x m frames of timeframe_len seconds
    j: Annotated[Count, Field(ge=1, le=100)] = 16
    m: Annotated[Count, Field(ge=1, le=100)] = 24
    timeframe_len: Annotated[Count, Field(ge=10, le=86400)] = 300
    # the network over the frame sequence, trained for `epochs` passes
    network: Literal["lstm", "gru", "conv"] = "lstm"
    layers: Annotated[Count, Field(ge=1, le=4)] = 1
    hidden_size: Annotated[Count, Field(ge=4, le=512)] = 32
    embedding_dim: Annotated[Count, Field(ge=1, le=64)] = 8
    dropout: Annotated[Real, Field(ge=0, lt=1)] = 0.1
    learning_rate: Annotated[Real, Field(gt=0, le=1)] = 3e-3
    weight_decay: Annotated[Real, Field(ge=0, le=1)] = 1e-4
    batch_size: Annotated[Count, Field(ge=8, le=8192)] = 128
    epochs: Annotated[Count, Field(ge=1, le=500)] = 6
    # the tree baseline on static and count features
    gbt_max_iter: Annotated[Count, Field(ge=10, le=5000)] = 100
    gbt_learning_rate: Annotated[Real, Field(gt=0, le=1)] = 0.1
    # the site's rule: a typical SYSTEM_PERIODIC_RELEASE
    policy_codes: list[Annotated[Count, Field(ge=0, le=1000)]] = Field(default_factory=lambda: [12, 13, 21, 26, 34])
    policy_max_releases: Annotated[Count, Field(ge=0, le=100)] = 3
    # evaluation: grouped cross-validation over workflows (`folds` 0: each workflow held out whole, on its own),
    # on real ended holds when there are `min_real_holds` of them in at least two workflows; the weights of the
    # generated holds tried (times the real training holds; each weight is a fit per fold, and 4 was never chosen
    # on the bundled real holds)
    folds: Annotated[Count, Field(ge=0, le=50)] = 0
    synthetic_weights: list[Annotated[Real, Field(ge=0, le=1000)]] = Field(
        default_factory=lambda: [0.0, 1.0], min_length=1, max_length=10)
    min_real_holds: Annotated[Count, Field(ge=2, le=1_000_000)] = 30
    bootstrap: Annotated[Count, Field(ge=100, le=100_000)] = 2000
    # the decision and the choice of the decision-maker (jobaware.hold.deciders): a wrong removal weighs this many
    # wrong releases; the worst case is taken over workflows with at least `min_workflow_holds` evaluation holds
    wrong_remove_cost: Annotated[Real, Field(gt=0, le=1000)] = 3.0
    min_workflow_holds: Annotated[Count, Field(ge=1, le=1_000_000)] = 10
    # labels, and the most recent holds of the generated logs kept
    nonzero_exit_is_failure: bool = False
    max_decisions: Annotated[Count, Field(ge=100, le=10_000_000)] = 200_000
    # CPU threads of torch and the trees: 1 suits trials run side by side (and shared machines)
    threads: Annotated[Count, Field(ge=1, le=256)] = 1
    seed: Annotated[Count, Field(ge=0, le=2**32 - 1)] = 0

    @field_validator("folds")
    @classmethod
    def _not_one_fold(cls, folds: int) -> int:
        if folds == 1:
            raise ValueError("one fold leaves nothing to train on: give 0 (each workflow held out on its own) or 2 "
                             "or more")
        return folds


def check_params(raw: dict[str, Any] | None) -> dict[str, Any]:
    """Defaults filled in; unknown keys and bad values refused with one line naming them."""
    return validate_params(Params, raw, "hold")
