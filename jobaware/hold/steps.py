"""`hold`'s functions for the shared platform's registry, as plain functions over files.

  ingest(sources, out_dir, strict, progress)        jobaware.hold.reader.ingest
  synth(out, n, seed, fmt, progress) -> truth file  write_synthetic
  default_data(data_dir, progress) -> str           default_data
  signature(), input_example(bundle)                jobaware.hold.bundle
  score(bundle, eval_dir) -> (metric, rows)         jobaware.hold.train.score
  predict_file(input, output, bundle, version)      predict_file
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from jobaware import fit, tracking
from jobaware.errors import InputError
from jobaware.hold import synth
from jobaware.hold.bundle import HoldBundle
from jobaware.hold import sweep
from jobaware.hold.params import check_params
from jobaware.hold.reader import CONTRACT, SCHEMA, EventLogReader, to_frame
from jobaware.outputs import atomic_text
from jobaware.prediction import PredictionSummary
from jobaware.reading import write_quarantine
from jobaware.hold.train import best_trial, run_trial

DEFAULT_SYNTH_JOBS = 40_000
FORMATS = {"iso": False, "old": True}


def write_synthetic(out: Path, n: int, seed: int = 0, fmt: str | None = None, progress=None) -> Path:
    """`jobaware data synth hold`: a global event log (`fmt` iso, the default, or old year-less dates);
    returns the truth file beside it."""
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    return synth.write(out, n, seed, year_less=FORMATS[fmt or "iso"], progress=progress)


def default_data(data_dir: Path, progress=None) -> str:
    """A synthetic global event log, generated once under `data_dir` (the embedded default of `make run`);
    its truth lies beside it (jobaware.hold.synth.truth_path)."""
    path = Path(data_dir) / f"synthetic_hold_{DEFAULT_SYNTH_JOBS}.log"
    if not path.exists() or not synth.truth_path(path).exists():
        synth.write(path, DEFAULT_SYNTH_JOBS, 0, progress=progress)
    return str(path)


def predict_file(inputs: list[str], output: str | Path, bundle: HoldBundle, version: str,
                 progress=None) -> PredictionSummary:
    """Decide every hold still standing at the end of the event logs (files, globs, folders); one JSON object
    per line in `output` (`-`: standard output), bad records in `<output>.quarantine.jsonl`."""
    quarantined: list[dict] = []
    reader = EventLogReader(inputs, strict=False, progress=progress,
                            on_bad=lambda record: quarantined.append(json.loads(record.as_json())))
    events = to_frame(pa.Table.from_batches(list(reader.batches()), schema=SCHEMA))
    if not len(events):
        raise InputError(f"{', '.join(map(str, inputs))}: no HTCondor event read"
                         + (f"; first problem: {reader.report.problems[0]}" if reader.report.problems else ""))
    decided = bundle.predict(events)
    with atomic_text(output) as handle:
        for row in decided.itertuples(index=False):
            record = row._asdict()
            record["hold_time"] = record["hold_time"].isoformat(sep=" ")
            for key in ("hold_code", "hold_subcode"):
                record[key] = None if record[key] != record[key] else int(record[key])
            record["model_version"] = version
            handle.write(json.dumps(record) + "\n")
    return PredictionSummary(predictions=len(decided), model_version=version, output=str(output),
                             bad_records=reader.report.bad_rows, quarantine=write_quarantine(output, quarantined),
                             problems=[str(p) for p in reader.report.problems],
                             counts={"events": reader.report.rows, "remove": int((decided["decision"] == "remove").sum())},
                             input_profile=fit.describe({CONTRACT: events}, inputs))


def sweep_trials(params: str, space: str | sweep.Space = "") -> list[dict]:
    """The sweep's trial parameter sets, each with the run's explicit `params` pinned over the space
    (`space`: YAML text, a file or a loaded Space; empty for the bundled jobaware/hold/sweep.yaml)."""
    given = json.loads(params or "{}")
    check_params(given)
    return [check_params({**trial, **given}) for trial in sweep.trials(space or None)]


def sweep_step(params: str, space: str = "") -> list[str]:
    """Open the sweep's MLflow run; the trials as JSON, each naming its number and the sweep's run."""
    loaded = sweep.load_space(space or None)
    trials = sweep_trials(params, loaded)
    sweep_run = tracking.open_sweep("hold", loaded.model_dump(), trials)
    return [json.dumps({"sweep_run": sweep_run, "number": n, "params": p}) for n, p in enumerate(trials)]


def trial_step(dataset: str, trial: str, truth: str = "") -> str:
    """Run one sweep trial, logged as a run nested under the sweep's; its parameters and metrics as JSON."""
    t = json.loads(trial)
    results = run_trial(dataset, t["params"], None, truth or None)
    t["run_id"] = tracking.log_trial("hold", t["sweep_run"], t["number"], t["params"], results)
    print(json.dumps({k: round(v, 4) for k, v in results.items()}))
    return json.dumps({**t, "results": results})


def best_step(outcomes: list[str]) -> str:
    """The parameters (JSON) of the trial with the best validation metric; the ranking is printed and the
    choice recorded on the sweep's run."""
    trials = sorted((json.loads(o) for o in outcomes), key=lambda t: t["number"])
    chosen = trials[best_trial([t["results"] for t in trials])]
    for t in trials:
        mark = "*" if t is chosen else " "
        print(f"{mark} trial {t['number']}: validation {t['params']['primary_metric']} "
              f"{t['results']['validation_primary']:.4f}  {json.dumps(t['params'], sort_keys=True)}")
    tracking.close_sweep(chosen["sweep_run"], chosen["number"], chosen["params"], chosen["results"]["validation_primary"])
    return json.dumps(chosen["params"])
