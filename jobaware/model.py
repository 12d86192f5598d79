"""What the platform knows of every capability's model: the `Bundle` it registers and serves, and the
`Evaluation` its training returns. A slice's bundle and evaluation subclass these (taking their defaults);
`tracking`, the shared steps and `jobaware.serving.base` use nothing else of them. `Served` is what a service hands a
slice's route function: the bundle, its version and its training profile."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pandas as pd


class Bundle(Protocol):
    """The registered artefact of a capability (pickled with joblib inside an MLflow pyfunc)."""

    feature_version: str  # the feature code it was built with: a bundle of another version is refused
    # what it learnt from, for people and the `fit` answer (logged as a run tag); empty when it says nothing
    trained_on: Mapping[str, Any] = MappingProxyType({})

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        """One answer per input row, as the capability's pyfunc signature says."""
        ...

    def warm(self) -> None:
        """Build what serving needs once per loaded model, before the first request; nothing by default."""


@dataclass(kw_only=True)
class Evaluation:
    """Metrics per scorer (`"model"`: the trained model; the others: baselines), the plots drawn, the
    folder the promotion gate re-scores bundles on (`eval_dir`, where training wrote one), and what a run logs
    beside them where a capability has it: JSON `documents` (`metrics/<name>.json`), the `operating` point the
    model acts on (`tracking.log_operating`) and `run_params`, parameters learnt from the data."""

    metrics: dict[str, dict[str, float]]
    plots: list[Path] = field(default_factory=list)
    eval_dir: Path | None = None
    documents: dict[str, Any] = field(default_factory=dict)
    operating: dict[str, Any] = field(default_factory=dict)
    run_params: dict[str, Any] = field(default_factory=dict)

    @property
    def primary(self) -> dict[str, float]:
        """The trained model's metrics, the primary metric among them."""
        return self.metrics["model"]


@dataclass(frozen=True)
class Served:
    """The model a service answers with: the loaded bundle, its registered version and what it was trained on
    (`tracking.training_profile`, None when unrecorded)."""

    bundle: Any
    version: str
    profile: dict | None = None

    def fit(self, columns: dict | None = None) -> list[str]:
        """The answer's `fit` field: where the request (numeric columns by name) is unlike the training data."""
        from jobaware.fit import answer_flags

        return answer_flags(self.profile, self.version, columns)
