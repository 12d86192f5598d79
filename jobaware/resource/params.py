"""Parameters of a `resource` training run: types, ranges and defaults, checked before any work."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from jobaware.capabilities import validate_params


class Params(BaseModel):
    """Everything a pipeline run may tune."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    seed: int = Field(0, ge=0, le=2**31 - 1)
    cv_folds: int = Field(5, ge=2, le=10)
    # one repeat and 8 epochs keep `make run` within its budget (README, "Two commands"); a site's own evaluation
    # may ask more (--param cv_repeats=3 --param max_epochs=20): the spread over repeats needs at least two
    cv_repeats: int = Field(1, ge=1, le=20)
    candidates: list[Literal["rich", "sequence"]] = Field(default_factory=lambda: ["rich", "sequence"],
                                                          min_length=1, max_length=2)
    rich_c: float = Field(0.1, gt=0, le=1000)
    svm_c: float = Field(1.0, gt=0, le=1000)
    sequence_architecture: Literal["cnn", "gru"] = "cnn"
    embedding_dim: int = Field(32, ge=4, le=512)
    hidden_size: int = Field(64, ge=4, le=1024)
    kernel_size: int = Field(5, ge=1, le=15)
    max_len: int = Field(1024, ge=16, le=4096)
    max_epochs: int = Field(8, ge=1, le=500)
    batch_size: int = Field(16, ge=1, le=1024)
    learning_rate: float = Field(3e-3, gt=0, le=1)
    weight_decay: float = Field(1e-4, ge=0, le=1)
    dropout: float = Field(0.3, ge=0, lt=1)
    min_token_count: int = Field(2, ge=1, le=1000)
    torch_threads: int = Field(1, ge=1, le=64)
    bundled_real: bool = True
    synthetic_shell_weight: float = Field(1.0, ge=0, le=10)
    synthetic_python_weight: float = Field(0.05, ge=0, le=10)
    abstain_threshold: float = Field(0.0, ge=0, le=1)
    max_parse_bytes: int = Field(64 * 1024, ge=1024, le=4 * 1024 * 1024)
    parse_seconds: float = Field(5.0, gt=0, le=60)


def check_params(params: dict | Params | None) -> Params:
    """Parameters with defaults filled in; unknown keys and bad values refused with what was expected."""
    if isinstance(params, Params):
        return params
    return Params(**validate_params(Params, params, "resource"))
