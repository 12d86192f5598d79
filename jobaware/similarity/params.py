"""Parameters of a `similarity` pipeline run: types, ranges and defaults, checked before anything is built."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jobaware.capabilities import validate_params

Count = Annotated[int, Field(strict=True)]


class Params(BaseModel):
    """The index, its default algorithm, and the evaluation the promotion gate decides on."""

    model_config = ConfigDict(extra="forbid")

    # the default ranking (served, and scored by the promotion gate). b-aggz works on every pool (the binary
    # codings are always there) and found planted families best, with q-phases, on generated pools (see
    # evaluate.py and the slice's report); the others stay available per query
    algorithm: Literal["b-all", "b-aggz", "q-lev", "q-native", "q-phases", "ks"] = "b-aggz"
    top_k: Annotated[Count, Field(ge=1, le=1000)] = 10
    shard_jobs: Annotated[Count, Field(ge=1000, le=50_000_000)] = 2_000_000
    workers: Annotated[Count, Field(ge=0, le=1024)] = 0
    eval_k: Annotated[Count, Field(ge=1, le=100)] = 10
    eval_references: Annotated[Count, Field(ge=10, le=5000)] = 200
    eval_pool_jobs: Annotated[Count, Field(ge=1000, le=5_000_000)] = 100_000
    eval_family_size: Annotated[Count, Field(ge=2, le=100)] = 11
    timing: bool = True
    seed: Annotated[Count, Field(ge=0, le=2**32 - 1)] = 0


def check_params(raw: dict[str, Any] | None) -> dict[str, Any]:
    """Parameters with defaults filled in; unknown keys and bad values refused with what was expected."""
    return validate_params(Params, raw, "similarity")
