"""The hyper-parameter sweep: a search space in YAML -> a seeded list of trial parameter sets.

The space (see sweep.yaml, the small default of `make run`):
  method: random | grid     random draws `trials` sets; grid enumerates every combination of the lists
  seed: 0                   the seed of the draws
  trials: 8                 how many sets (grid: at most this many, in order)
  space:                    per parameter of jobaware.hold.params.Params (j, m, timeframe_len, layers,
    name: [a, b, c]         hidden_size, learning_rate, batch_size, epochs, synthetic_weights, ...): a list of
    name: {low, high, log, step}   choices, or a range (integers when low, high and step are integers)
  fixed: {name: value}      shared by every trial
Every trial is checked against Params before any runs. `jobaware.hold.train.run_trial` runs one trial and
`jobaware.hold.train.best_trial` picks the one with the highest validation metric.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from jobaware import settings
from jobaware.errors import JobawareError, one_line
from jobaware.hold.params import Params, check_params

DEFAULT_SPACE = Path(__file__).with_name("sweep.yaml")


class Range(BaseModel):
    model_config = ConfigDict(extra="forbid")

    low: float
    high: float
    log: bool = False
    step: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.high < self.low or (self.log and self.low <= 0):
            raise ValueError("expected low <= high (and low > 0 with log)")
        return self

    def integers(self) -> bool:
        return all(float(v).is_integer() for v in (self.low, self.high)) and (self.step is None or float(self.step).is_integer()) \
            and not self.log

    def draw(self, rng: np.random.Generator) -> float | int:
        if self.log:
            return float(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))
        if self.step is not None or self.integers():
            step = self.step or 1
            count = int(math.floor((self.high - self.low) / step)) + 1
            value = self.low + step * int(rng.integers(count))
            return int(value) if self.integers() else float(value)
        return float(rng.uniform(self.low, self.high))


class Space(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: Literal["random", "grid"] = "random"
    seed: int = Field(default=0, ge=0, strict=True)
    trials: int = Field(default=8, ge=1, le=1000, strict=True)
    space: dict[str, Any] = Field(default_factory=dict)
    fixed: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known_parameters(self) -> Space:
        known = set(Params.model_fields)
        unknown = sorted((set(self.space) | set(self.fixed)) - known)
        if unknown:
            raise ValueError(f"unknown parameter(s) {', '.join(unknown)}")
        for name, values in self.space.items():
            if isinstance(values, dict):
                try:
                    self.space[name] = Range.model_validate(values)
                except ValidationError as exc:
                    raise ValueError(f"space.{name}: {one_line(exc)}") from None
            elif not isinstance(values, list) or not values:
                raise ValueError(f"space.{name}: expected a list of choices or a range {{low, high}}, got {values!r}")
        if self.method == "grid" and any(isinstance(v, Range) for v in self.space.values()):
            raise ValueError("grid needs lists of choices, not ranges")
        return self


def load_space(source: str | Path | dict | Space | None = None) -> Space:
    """A search space from a YAML file, YAML text, a dict or a loaded Space (default: the bundled small space)."""
    if isinstance(source, Space):
        return source
    if source is None:
        source = DEFAULT_SPACE
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and source.endswith((".yaml", ".yml"))):
        source = Path(source)
        if not source.is_file():
            raise JobawareError(f"{source}: no such search-space file")
    return settings.load(Space, source, "search space")


def trials(source: str | Path | dict | Space | None = None) -> list[dict[str, Any]]:
    """The trial parameter sets of a search space, each checked against Params."""
    space = load_space(source)
    rng = np.random.default_rng(space.seed)
    names = list(space.space)
    if space.method == "grid":
        combos = itertools.islice(itertools.product(*(space.space[n] for n in names)), space.trials)
        sets = [dict(zip(names, combo)) for combo in combos]
    else:
        sets = [{n: v.draw(rng) if isinstance(v, Range) else v[int(rng.integers(len(v)))]
                 for n, v in space.space.items()} for _ in range(space.trials)]
    out = []
    for number, values in enumerate(sets):
        trial = {**space.fixed, **{k: (v.item() if hasattr(v, "item") else v) for k, v in values.items()}}
        try:
            check_params(trial)
        except JobawareError as exc:
            raise JobawareError(f"search space: trial {number}: {exc}") from None
        out.append(trial)
    return out


def pinned_trials(params: str, space: str | Space = "") -> list[dict]:
    """The sweep's trial parameter sets, each with the run's explicit `params` pinned over the space
    (`space`: YAML text, a file or a loaded Space; empty for the bundled jobaware/hold/sweep.yaml)."""
    given = json.loads(params or "{}")
    check_params(given)
    return [check_params({**trial, **given}) for trial in trials(space or None)]
