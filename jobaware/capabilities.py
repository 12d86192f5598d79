"""The capability registry: one `Capability` record per key, found in `jobaware/<key>/capability.py`.

The CLI, the MLflow conventions, the pipeline runner, the generic components and the conformance tests
read this registry; a capability joins by adding its own slice with a `capability.py` that defines
`CAPABILITY`, and touches no shared module. The record's functions are given as `"module:function"`
references and imported on first use, so that listing the capabilities imports no model code.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from jobaware.errors import JobawareError, one_line

# the trivial baselines of a capability that names none of its own
TRIVIAL_BASELINES = {"majority": "always the most common answer", "random": "a random ranking"}


class Ref:
    """A function named as `"package.module:function"`, imported when first called."""

    def __init__(self, target: str):
        self.target = target

    def resolve(self):
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Ref({self.target!r})"


@dataclass(frozen=True)
class CardPart:
    """A capability's part of the job card (`jobaware/card.py` holds the contract): `"module:function"` references
    into the slice's own `jobaware/<key>/card.py`.

      answer(context: dict, ask: card.Asking) -> dict
          the part's fields for one job: `ask.post(route, body)` asks the capability's own service,
          `ask.part(key, context)` another capability's part; raise `card.NotApplicable(reason)` when the job
          cannot have this part
      shown(part: dict) -> str
          the part's cell in `jobaware card`'s table (an answered part)
      words(part: dict, history: dict) -> str | None  (optional)
          the part in a few words (any status), for the job's comment and the verdict cache; None: nothing
      advice(part: dict, history: dict) -> str | None  (optional)
          one sentence for the user at submission (`cli_filter.lua`); None: no advice. It may name the values
          the job asks for, `{time_minutes}`, `{nodes}`, `{cpus}`, `{mem_mib}`, `{gpus}`, which the plugin fills
          in; words in square brackets around such a name are left out when the job does not state the value
      hold(part: dict, site_threshold: float | None) -> str | None  (optional)
          why an adapter whose policy holds risky jobs should hold this one; None: no reason
      accuracy(store: jobaware.store.JobStore) -> list[dict]  (optional)
          how the part did on live jobs: what it said of the store's finished jobs (the cards kept there, each with
          its `created`) against what happened, as the rows of a table (by week and model version);
          `jobaware report live` prints one table per capability that declares it
    `required`: an adapter writes no verdict for a job until this part has answered.
    `refresh_s`: for a part whose answer ages (a remaining wait), how often an adapter asks a pending job's card
    again: a job whose newest verdict is older than the smallest `refresh_s` of the parts asked gets a new one (its
    comment rewritten only when the words changed). None: one verdict per job and set of model versions.
    """

    answer: Ref
    shown: Ref
    words: Ref | None = None
    advice: Ref | None = None
    hold: Ref | None = None
    accuracy: Ref | None = None
    required: bool = False
    refresh_s: float | None = None

    def __post_init__(self):
        if self.refresh_s is not None and not self.refresh_s > 0:
            raise JobawareError(f"card part of {self.answer.target}: refresh_s must be positive seconds, "
                                f"got {self.refresh_s}")


@dataclass(frozen=True)
class Capability:
    """Everything the shared platform needs to know about one capability.

    Functions (each a `Ref`):
      ingest(sources: list[str], out_dir: Path, strict: bool, progress) -> ReadReport
          source files -> `out_dir/<contract>.parquet` tables + `out_dir/quarantine.jsonl`
      synth(out: Path, n: int, seed: int, fmt: str | None, progress) -> Path
          generated data in the real format; returns the ground-truth file beside it
      default_data(data_dir: Path, progress) -> str
          the embedded default data of `make run` (bundled or generated once under `data_dir`)
      signature() -> mlflow.models.ModelSignature;  input_example(bundle) -> DataFrame
      score(bundle, eval_dir: Path) -> tuple[float, int]
          the primary metric of a bundle on a stored evaluation folder, and its number of rows
      predict_file(inputs: list[str], output: str | Path, model: () -> (bundle, version), progress) -> PredictionSummary
          predictions for files, folders or globs, written whole as JSON Lines (`-`: standard output);
          returns the one summary shape of jobaware.prediction. It reads the input first and calls `model()` only
          when there is something to predict: input with nothing usable is an InputError before any model loads
      train(dataset_dir: Path, params: dict, workdir: Path[, truth: str]) -> (bundle, evaluation)
          fit and evaluate (bundle: a jobaware.model.Bundle; evaluation: a jobaware.model.Evaluation), writing the
          gate's evaluation folder under `workdir`; the shared `train` step runs it for every capability
      from_store(uri: str, out_dir: Path) -> str  (optional)
          the records of a job store (jobaware.store) as a file its ingest reads, written in `out_dir`
      gate_size(dataset_dir: Path, min_rows: int, data: str) -> str | None  (optional)
          checked before training: why a dataset cannot give the gate `min_rows` evaluation rows, with how much
          more data it needs (`data`: where it came from, in words), or None when it can
      compare(candidate, champion, eval_dir: Path) -> dict  (optional)
          the primary metric's difference (candidate - champion) on a stored evaluation folder with its confidence
          interval: {"difference", "low", "high", "level"}; with it the gate promotes a candidate whose `low` is at
          least -`gate_margin` (not worse than the champion beyond the margin, at that confidence)
      commands(group: typer.Typer, root: typer.Typer) -> None  (optional)
          adds the capability's own CLI commands to `group` (`jobaware <key> ...`); `root` for hidden old spellings
    `card` (optional): the capability's part of the job card, a `CardPart`.
    Data: `service` and `pipeline` as "module:attribute"; `formats`: the source formats its readers take, in
    words, for people; `example` = (route, request body) for people;
    `smoke` = (records to generate, parameters) of a small, quick run for the conformance tests;
    `service_memory` = (request, limit) of one service pod's memory in the Kubernetes manifests (`jobaware.manifests`).
    `metrics_table`: the metrics document's columns shown for a trained version (`jobaware.results`);
    `trivial_baselines`: {name: what it answers, in words} of the baselines in that document that any model must beat
    (the answers that need no model), shown after the model with a note wherever the model does not beat one.
    """

    key: str
    question: str
    params: type[BaseModel]
    primary_metric: str
    higher_is_better: bool
    min_eval_rows: int
    feature_version: str
    ingest: Ref
    synth: Ref
    default_data: Ref
    signature: Ref
    input_example: Ref
    score: Ref
    predict_file: Ref
    train: Ref
    service: str
    pipeline: str
    example: tuple[str, dict]
    smoke: tuple[int, dict]
    commands: Ref | None = None
    from_store: Ref | None = None
    gate_size: Ref | None = None
    compare: Ref | None = None
    gate_margin: float = 0.0
    card: CardPart | None = None
    formats: tuple[str, ...] = ()
    metrics_table: tuple[str, ...] = field(default_factory=tuple)
    trivial_baselines: dict[str, str] = field(default_factory=lambda: dict(TRIVIAL_BASELINES))
    service_memory: tuple[str, str] = ("1536Mi", "4Gi")

    @property
    def model_name(self) -> str:
        return f"jobaware-{self.key}"

    @property
    def experiment_name(self) -> str:
        return f"jobaware-{self.key}"

    def check_params(self, raw: dict[str, Any]) -> dict[str, Any]:
        """Validated parameters with defaults filled in; unknown keys and bad values refused."""
        return validate_params(self.params, raw, self.key)

    def better(self, challenger: float, champion: float) -> bool:
        """True when the challenger is at least as good as the champion on the primary metric."""
        return challenger >= champion if self.higher_is_better else challenger <= champion


def validate_params(model: type[BaseModel], raw: dict[str, Any] | None, key: str) -> dict[str, Any]:
    """`raw` checked against a pydantic parameter model, as a plain dict; errors are one JobawareError line."""
    if raw is not None and not isinstance(raw, dict):
        raise JobawareError(f"parameters of {key}: expected an object of key=value pairs, got {raw!r}")
    try:
        return model.model_validate(raw or {}).model_dump()
    except ValidationError as exc:
        unknown = f"unknown parameter (valid: {', '.join(model.model_fields)})"
        raise JobawareError(f"parameters of {key}: {one_line(exc, limit=3, unknown=unknown)}") from None


@cache
def registry() -> dict[str, Capability]:
    """Every capability found as `jobaware/<key>/capability.py` (in each folder of the package's path), by key."""
    found = {}
    folders = [Path(folder) for folder in importlib.import_module("jobaware").__path__]
    names = sorted({module.name for folder in folders for module in pkgutil.iter_modules([str(folder)])
                    if module.ispkg and (folder / module.name / "capability.py").is_file()})
    for name in names:
        capability = importlib.import_module(f"jobaware.{name}.capability").CAPABILITY
        if capability.key != name:
            raise JobawareError(f"jobaware/{name}/capability.py registers key '{capability.key}'")
        found[capability.key] = capability
    return found


def keys() -> list[str]:
    return list(registry())


def get(key: str) -> Capability:
    """The capability registered under `key`, or a clear error naming the known ones."""
    try:
        return registry()[key]
    except KeyError:
        raise JobawareError(f"unknown capability '{key}'; available: {', '.join(keys())}") from None
