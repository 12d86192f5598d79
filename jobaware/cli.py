"""The `jobaware` command: data, pipelines, models, predictions and services."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from jobaware import config
from jobaware.errors import JobawareError

app = typer.Typer(help="Job awareness for HPC schedulers.", no_args_is_help=True, pretty_exceptions_enable=False)
data_app = typer.Typer(help="Read, validate and generate job data.", no_args_is_help=True)
pipeline_app = typer.Typer(help="Run, submit and compile the KFP pipelines.", no_args_is_help=True)
models_app = typer.Typer(help="The MLflow model registry: list, promote, roll back.", no_args_is_help=True)
app.add_typer(data_app, name="data")
app.add_typer(pipeline_app, name="pipeline")
app.add_typer(models_app, name="models")
out = Console()
err = Console(stderr=True)

Capability = Annotated[str, typer.Argument(help="capability key: failure")]
JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON instead of tables")]
DEFAULT_SYNTH_JOBS = 150_000


def _capability(key: str) -> str:
    if key not in config.CAPABILITIES:
        raise JobawareError(f"unknown capability '{key}'; available: {', '.join(config.CAPABILITIES)}")
    return key


def _progress(label: str, total: int | None = None) -> Progress:
    return Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                    transient=True)


def _table(rows: list[dict], title: str | None = None) -> Table:
    table = Table(title=title)
    for column in (rows[0] if rows else {}):
        table.add_column(str(column))
    for row in rows:
        table.add_row(*[f"{v:.4f}" if isinstance(v, float) else str(v) for v in row.values()])
    return table


def _print(data, as_json: bool, rows: list[dict] | None = None, title: str | None = None) -> None:
    if as_json:
        print(json.dumps(data, indent=2, default=str))
    else:
        out.print(_table(rows if rows is not None else [data], title))


def _parse_params(items: list[str]) -> dict:
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise JobawareError(f"--param {item!r}: expected key=value")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    from jobaware.failure.model import check_params

    check_params(params)
    return params


# ---------------------------------------------------------------- data
@data_app.command("validate")
def data_validate(
    key: Capability,
    path: Annotated[Path, typer.Argument(help="job file: NREL CSV/JSON/Parquet or SWF trace")],
    as_json: JsonFlag = False,
    strict: Annotated[bool, typer.Option(help="a bad record is an error, not a skipped row")] = False,
):
    """Check a job file against its data contract: exit 0 when met, 1 with a report when not."""
    import tempfile

    from jobaware import contracts
    from jobaware.failure.readers import ingest

    _capability(key)
    with tempfile.TemporaryDirectory() as tmp:
        canonical = Path(tmp) / "jobs.parquet"
        with _progress("reading") as bar:
            task = bar.add_task("jobs", total=None)
            read = ingest(path, canonical, strict=strict, progress=lambda n: bar.advance(task, n))
        with err.status(f"checking {read.rows:,} jobs against the {contracts.contract_for(path)} contract"):
            report = contracts.validate_parquet(canonical, contracts.contract_for(path))
    report["read"] = read.as_dict()
    if as_json:
        print(json.dumps(report, indent=2, default=str))
    else:
        if read.bad_rows:
            err.print(f"[yellow]{read.bad_rows} bad record(s) skipped; first: {read.problems[0]}[/yellow]")
        (out if report["success"] else err).print(contracts.format_report(report))
    raise typer.Exit(0 if report["success"] else 1)


@data_app.command("synth")
def data_synth(
    key: Capability,
    jobs: Annotated[int, typer.Option(help="number of jobs, 1,000 to 11,000,000")],
    out_path: Annotated[Path, typer.Option("--out", help="output file")],
    fmt: Annotated[str, typer.Option("--format", help="csv, json or parquet (default: from the suffix)")] = "",
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
):
    """Write synthetic jobs in the exact NREL format, with each job's true outcome probabilities beside them."""
    from jobaware.failure import synth

    _capability(key)
    with _progress("generating") as bar:
        task = bar.add_task("jobs", total=jobs)
        truth = synth.write(out_path, jobs, fmt or None, seed, progress=lambda n: bar.advance(task, n))
    out.print(f"wrote {jobs:,} jobs to {out_path}; true outcome probabilities in {truth}")
    out.print(f"mean true class probabilities: {synth.describe(truth)}")


# ---------------------------------------------------------------- pipelines
def default_failure_data() -> Path:
    """Synthetic NREL-format jobs under JOBAWARE_HOME, generated once (the embedded default)."""
    from jobaware.failure import synth

    path = config.home() / "data" / f"synthetic_failure_{DEFAULT_SYNTH_JOBS}.parquet"
    if not path.exists():
        with _progress("generating default synthetic jobs") as bar:
            task = bar.add_task("jobs", total=DEFAULT_SYNTH_JOBS)
            synth.write(path, DEFAULT_SYNTH_JOBS, "parquet", 0, progress=lambda n: bar.advance(task, n))
    return path


@pipeline_app.command("run")
def pipeline_run(
    key: Annotated[str, typer.Argument(help="failure or all")],
    data: Annotated[Path | None, typer.Option(help="job file (default: synthetic jobs under JOBAWARE_HOME)")] = None,
    param: Annotated[list[str], typer.Option(help="model parameter key=value, repeatable")] = [],  # noqa: B006
    host: Annotated[str, typer.Option(envvar="KFP_HOST", help="submit to this Kubeflow Pipelines host")] = "",
    as_json: JsonFlag = False,
):
    """Run a pipeline with kfp.local (default) or submit it to a KFP host."""
    if key != "all":
        _capability(key)
    params = json.dumps(_parse_params(param))
    source = (data or default_failure_data()).resolve()
    if not source.is_file():
        raise JobawareError(f"{source}: no such file")
    arguments = (
        {"data": str(source), "params": params, "tracking_uri": "" if host else config.tracking_uri()}
        if key == "failure"
        else {"failure_data": str(source), "failure_params": params, "tracking_uri": "" if host else config.tracking_uri()}
    )
    if host:
        from pipelines.runner import submit

        run_id = submit(key, arguments, host, config.experiment_name(key))
        _print({"submitted": key, "host": host, "run_id": run_id}, as_json)
        return
    from pipelines.runner import run_local

    try:
        with _stdout_to_stderr():
            run_local(key, arguments, config.home() / "kfp")
    except RuntimeError as exc:
        raise JobawareError(f"pipeline {key} failed: {_plain(exc)} (the task log above says why)") from None
    _print_training_summary(as_json)


@contextlib.contextmanager
def _stdout_to_stderr():
    """kfp.local logs its tasks (and their subprocesses) on stdout; keep stdout for our results."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _plain(exc: Exception) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", str(exc))


def _print_training_summary(as_json: bool) -> None:
    from jobaware import tracking

    _, client = tracking.mlflow_client()
    newest = tracking.list_models()[-1]
    run = client.get_run(newest["run_id"])
    metrics = json.loads(Path(client.download_artifacts(run.info.run_id, "metrics/all.json")).read_text())
    summary = {"version": newest["version"], "aliases": newest["aliases"], "run_id": newest["run_id"], "metrics": metrics}
    rows = [{"model": k, **{m: v.get(m, float("nan")) for m in ("roc_auc", "pr_auc", "brier", "macro_f1")}}
            for k, v in metrics.items()]
    _print(summary, as_json, rows, title=f"version {newest['version']} ({newest['aliases'] or 'no alias'})")
    if not as_json and "bayes_roc_auc" in metrics["model"]:
        m = metrics["model"]
        out.print(f"Bayes-optimal ROC-AUC {m['bayes_roc_auc']:.4f}; gap to the model {m['gap_to_bayes']:.4f}")


@pipeline_app.command("compile")
def pipeline_compile(out_dir: Annotated[Path, typer.Option("--out", help="directory for the IR YAML files")]):
    """Compile every pipeline to KFP IR YAML."""
    from pipelines.runner import compile_all

    for path in compile_all(out_dir):
        out.print(f"wrote {path}")


# ---------------------------------------------------------------- models
@models_app.command("list")
def models_list(as_json: JsonFlag = False):
    """Registered model versions with their aliases and primary metric."""
    from jobaware import tracking

    rows = tracking.list_models()
    if not rows and not as_json:
        out.print("no registered models yet; run `jobaware pipeline run failure`")
        return
    _print(rows, as_json, rows)


@models_app.command("promote")
def models_promote(
    key: Capability,
    version: Annotated[str, typer.Argument(help="model version to promote")],
    force: Annotated[bool, typer.Option(help="promote even if the gate says no")] = False,
    as_json: JsonFlag = False,
):
    """Re-score champion and VERSION on VERSION's evaluation data; move champion if VERSION is not worse."""
    from jobaware import tracking

    decision = tracking.promote(_capability(key), version, force)
    _print(decision, as_json)
    raise typer.Exit(0 if decision["promoted"] else 1)


@models_app.command("rollback")
def models_rollback(key: Capability, as_json: JsonFlag = False):
    """Point champion back at the previous champion."""
    from jobaware import tracking

    _print(tracking.rollback(_capability(key)), as_json)


@app.command("collect")
def collect(
    source: Annotated[str, typer.Argument(help="slurm")],
    out_path: Annotated[Path, typer.Option("--out", help="NREL-format CSV to append finished jobs to")],
    polls: Annotated[int, typer.Option(help="how many polls (bounded)")] = 1,
    interval: Annotated[float, typer.Option(help="seconds between polls")] = 60.0,
):
    """Poll `squeue --json` and append each newly finished job to an NREL-format CSV (once)."""
    from jobaware.failure.collector import collect as run_collector

    if source != "slurm":
        raise JobawareError(f"unknown source '{source}'; available: slurm")
    if polls < 1:
        raise JobawareError("--polls must be at least 1")
    added = run_collector(out_path, polls, interval, on_poll=lambda n: err.print(f"{n} new finished job(s) so far"))
    out.print(f"appended {added} finished job(s) to {out_path}")


# ---------------------------------------------------------------- predictions and services
@app.command("predict")
def predict(
    key: Capability,
    input_path: Annotated[Path, typer.Option("--input", help="job file (NREL, SWF or squeue --json output)")],
    output: Annotated[Path, typer.Option("--output", help="JSON Lines file, one object per job")],
    version: Annotated[str, typer.Option(help="model version (default: the champion)")] = "",
):
    """Predict every job in a file with the champion model."""
    from jobaware.failure.predict import predict_file

    _capability(key)
    count, used = predict_file(input_path, output, version or None)
    out.print(f"wrote {count:,} predictions to {output} (model version {used})")


@app.command("serve")
def serve(
    key: Capability,
    port: Annotated[int, typer.Option(help="TCP port")] = 3000,
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
):
    """Serve the champion model over HTTP with BentoML."""
    _capability(key)
    raise typer.Exit(subprocess.call(service_command(key, port, host), env=service_env()))


def service_command(key: str, port: int, host: str) -> list[str]:
    bentoml = Path(sys.executable).with_name("bentoml")
    return [str(bentoml), "serve", f"serving.{key}:{key.capitalize()}Service", "--port", str(port), "--host", host]


def service_env() -> dict:
    return {**os.environ, "MLFLOW_TRACKING_URI": config.tracking_uri(), "JOBAWARE_HOME": str(config.home()),
            "BENTOML_HOME": str(config.home() / "bentoml")}


@app.command("demo")
def demo(port: Annotated[int, typer.Option(help="port of the failure service")] = 3000):
    """What `make run` does: run every pipeline on bundled data, then serve the champions on localhost."""
    pipeline_run("failure", None, [], "", False)
    example = {"jobs": [{"job_id": 1, "user": "user0001", "account": "account0001", "partition": "partition002",
                         "qos": "normal", "wallclock_req": 3600.0, "nodes_req": 2, "processors_req": 72,
                         "gpus_req": 0, "mem_req": 0.0, "submit_time": "2019-03-01 10:00:00"}]}
    out.print(f"\nserving failure on http://127.0.0.1:{port} (OpenAPI: http://127.0.0.1:{port}/docs)")
    out.print(f"try: curl -s -X POST http://127.0.0.1:{port}/predict -H 'content-type: application/json' "
              f"-d '{json.dumps(example)}'", soft_wrap=True, highlight=False)
    serve("failure", port, "127.0.0.1")


def main() -> None:
    """Entry point: user errors are one clear line; JOBAWARE_DEBUG=1 shows the traceback."""
    import click

    try:
        code = app(standalone_mode=False)  # click returns a typer.Exit's code instead of raising it here
        sys.exit(code if isinstance(code, int) else 0)
    except JobawareError as exc:  # ContractError included: its message is the readable report
        err.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(1)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the last line of defence for a one-line error
        if os.environ.get("JOBAWARE_DEBUG"):
            raise
        err.print(f"[red]error:[/red] {type(exc).__name__}: {exc} (set JOBAWARE_DEBUG=1 for the traceback)",
                  highlight=False, soft_wrap=True)
        sys.exit(1)
