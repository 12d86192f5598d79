"""The one summary every capability's `predict_file` returns, whatever it predicts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class PredictionSummary:
    """What `jobaware predict` reports: how many records were predicted and where they went, how many bad
    records were left out (listed in `quarantine`, the first `problems` quoted), counts of the capability's
    own (`counts`), the input's profile (`input_profile`, from `jobaware.fit.describe`), the lines on how
    far it is from the model's training data (`fit`, filled in by the caller that knows the model) and, when
    nothing was predicted from input that was read, the `reason`."""

    predictions: int
    model_version: str | None  # None: no model was loaded (nothing to predict)
    output: str
    bad_records: int = 0
    quarantine: str | None = None
    problems: list[str] = field(default_factory=list)
    fit: list[str] = field(default_factory=list)
    counts: dict[str, float] = field(default_factory=dict)
    input_profile: dict = field(default_factory=dict)
    reason: str | None = None  # why there are no predictions, when there are none

    def as_dict(self) -> dict:
        return asdict(self)
